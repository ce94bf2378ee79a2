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

  void step(std::span<const Position> batch, std::vector<const float*>& logits) override {
    logits.clear();
    for (const Position& p : batch)
      logits.push_back(static_cast<TransformerSequence*>(p.sequence)->transformer->forward(p.token, p.pos));
  }

  std::vector<std::span<std::byte>> weights() override { return weights_; }
  std::uint64_t kv_bytes_per_position() const override { return kv_bytes_per_position_; }

 private:
  std::function<std::unique_ptr<engine::Transformer>()> make_;
  std::vector<std::span<std::byte>> weights_;
  std::uint64_t kv_bytes_per_position_;
  std::shared_ptr<void> owner_;
};

}  // namespace

std::unique_ptr<Backend> single_sequence_backend(std::function<std::unique_ptr<engine::Transformer>()> new_transformer,
                                                 std::vector<std::span<std::byte>> weights,
                                                 std::uint64_t kv_bytes_per_position, std::shared_ptr<void> owner) {
  return std::make_unique<SingleSequenceBackend>(std::move(new_transformer), std::move(weights),
                                                 kv_bytes_per_position, std::move(owner));
}

}  // namespace serve
