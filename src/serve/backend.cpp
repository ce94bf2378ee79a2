#include <utility>

#include "serve/serve.hpp"

namespace serve {

namespace {

struct TransformerSequence : Sequence {
  std::unique_ptr<engine::Transformer> transformer;
};

class SingleSequenceBackend : public Backend {
 public:
  SingleSequenceBackend(std::function<std::unique_ptr<engine::Transformer>()> make,
                        std::vector<std::span<std::byte>> weights, std::uint64_t kv_bytes_per_position,
                        std::shared_ptr<void> owner)
      : make_(std::move(make)), weights_(std::move(weights)), kv_bytes_per_position_(kv_bytes_per_position),
        owner_(std::move(owner)) {}

  std::unique_ptr<Sequence> open() override {
    auto s = std::make_unique<TransformerSequence>();
    s->transformer = make_();
    return s;
  }

  // The batch as one engine call: matrix-matrix products over the sequences where the
  // engine is the fp32 reference, one forward() per sequence otherwise.
  void step(std::span<const Position> batch, std::vector<const float*>& logits) override {
    transformers_.clear();
    tokens_.clear();
    positions_.clear();
    for (const Position& p : batch) {
      transformers_.push_back(static_cast<TransformerSequence*>(p.sequence)->transformer.get());
      tokens_.push_back(p.token);
      positions_.push_back(p.pos);
    }
    engine::Transformer::forward_batch(transformers_, tokens_, positions_, logits);
  }

  std::vector<std::span<std::byte>> weights() override { return weights_; }
  std::uint64_t kv_bytes_per_position() const override { return kv_bytes_per_position_; }

 private:
  std::function<std::unique_ptr<engine::Transformer>()> make_;
  std::vector<std::span<std::byte>> weights_;
  std::uint64_t kv_bytes_per_position_;
  std::shared_ptr<void> owner_;
  std::vector<engine::Transformer*> transformers_;
  std::vector<int> tokens_, positions_;
};

}  // namespace

std::unique_ptr<Backend> single_sequence_backend(std::function<std::unique_ptr<engine::Transformer>()> new_transformer,
                                                 std::vector<std::span<std::byte>> weights,
                                                 std::uint64_t kv_bytes_per_position, std::shared_ptr<void> owner) {
  return std::make_unique<SingleSequenceBackend>(std::move(new_transformer), std::move(weights),
                                                 kv_bytes_per_position, std::move(owner));
}

}  // namespace serve
