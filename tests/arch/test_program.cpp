#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "arch/program.hpp"

namespace {

model::Config stories260k_config() {
  model::Config c;
  c.name = "stories260K";
  c.dim = 64;
  c.hidden_dim = 172;
  c.n_layers = 5;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.vocab_size = 512;
  c.seq_len = 512;
  return c;
}

int count(const arch::Program& p, arch::Op op) {
  int n = 0;
  for (const auto& i : p.instructions) n += i.op == op;
  return n;
}

TEST(Program, DecodeStepHasEveryOperationOfTheForwardPass) {
  const auto c = stories260k_config();
  arch::Design d;
  auto p = arch::build_program(c, d, arch::Stage::decode, 7, 1);
  EXPECT_EQ(count(p, arch::Op::embed), 1);
  EXPECT_EQ(count(p, arch::Op::matmul), 7 * c.n_layers + 1);
  EXPECT_EQ(count(p, arch::Op::attention), c.n_layers);
  EXPECT_EQ(count(p, arch::Op::norm), 2 * c.n_layers + 1);
  EXPECT_EQ(count(p, arch::Op::rope), c.n_layers);
  EXPECT_EQ(count(p, arch::Op::residual_add), 2 * c.n_layers);
  EXPECT_EQ(count(p, arch::Op::swiglu), c.n_layers);
  EXPECT_EQ(p.instructions.front().op, arch::Op::embed);
  EXPECT_EQ(p.instructions.back().op, arch::Op::matmul);
  EXPECT_EQ(p.instructions.back().linear, model::Linear::cls);
  // Hand count: per token, every weight once.
  const std::int64_t block_macs = 64LL * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 172 * 64;
  const std::int64_t attn_macs = 2LL * 8 * 8 * 8;  // 8 keys (pos 7), 8 heads, head_dim 8, q·k and p·v
  EXPECT_EQ(p.total_macs(), 5 * (block_macs + attn_macs) + 512 * 64);
}

TEST(Program, TilesAndBytesFollowTheDesign) {
  const auto c = stories260k_config();
  arch::Design d;
  d.tiling.tile_rows = 32;
  d.tiling.tile_cols = 64;
  auto p = arch::build_program(c, d, arch::Stage::decode, 0, 1);
  for (const auto& i : p.instructions) {
    if (i.op != arch::Op::matmul || i.linear != model::Linear::w2) continue;
    EXPECT_EQ(i.rows, 64);
    EXPECT_EQ(i.cols, 172);
    EXPECT_EQ(i.row_tiles, 2);
    EXPECT_EQ(i.col_tiles, 3);  // 172 = 64 + 64 + 44 (the last tile zero-padded)
    EXPECT_EQ(i.weight_bytes, 64 * 172 + 64 * 4);
    EXPECT_EQ(i.mem, arch::MemGroup::weights);
  }
  auto p4 = arch::build_program(c, d, arch::Stage::decode, 0, 1, [](int, model::Linear) {
    return arch::LinearPrecision{4, 32};
  });
  for (const auto& i : p4.instructions)
    if (i.op == arch::Op::matmul && i.linear == model::Linear::w2) {
      EXPECT_EQ(i.weight_bytes, 64 * 172 / 2 + 64 * 6 * 2);  // fp16 group scales
    }
}

TEST(Program, PrefillBlockReadsTheCacheOncePerStep) {
  const auto c = stories260k_config();
  arch::Design d;
  auto p = arch::build_program(c, d, arch::Stage::prefill, 16, 16);
  for (const auto& i : p.instructions) {
    EXPECT_EQ(i.tokens, 16);
    if (i.op == arch::Op::attention) {
      EXPECT_EQ(i.context, 32);
      EXPECT_EQ(i.kv_read_bytes, 2 * 32 * 32 * d.kv_bits / 8);
    }
  }
  EXPECT_THROW(arch::build_program(c, d, arch::Stage::decode, 0, 2), std::invalid_argument);
  EXPECT_THROW(arch::build_program(c, d, arch::Stage::prefill, 0, d.tiling.prefill_block + 1), std::invalid_argument);
  EXPECT_THROW(arch::build_program(c, d, arch::Stage::decode, 512, 1), std::invalid_argument);
}

TEST(Program, SerializesToJson) {
  auto p = arch::build_program(stories260k_config(), arch::Design{}, arch::Stage::decode, 3, 1);
  nlohmann::json j = p;
  EXPECT_EQ(j["stage"], "decode");
  EXPECT_EQ(j["instructions"].size(), p.instructions.size());
  EXPECT_EQ(j["instructions"][0]["op"], "embed");
}

}  // namespace

namespace {

// Qwen2: q/k/v biases, an operand of their matmuls; Qwen3: per-head q/k RMSNorm between
// the matmuls and RoPE, heads of 32 on a width of 64 with 4 heads (q is 128 wide).
TEST(Program, QwenBiasesAndHeadNormsAndFreeHeadWidth) {
  auto c = stories260k_config();
  c.arch = model::Arch::qwen2;
  c.qkv_bias = true;
  arch::Design d;
  auto p = arch::build_program(c, d, arch::Stage::decode, 3, 1);
  int biased = 0;
  for (const auto& i : p.instructions) {
    if (i.op != arch::Op::matmul) continue;
    const bool qkv = i.linear == model::Linear::wq || i.linear == model::Linear::wk || i.linear == model::Linear::wv;
    EXPECT_EQ(i.bias, qkv) << i.name;
    biased += i.bias;
    if (i.name == "blk.0.wk") {
      EXPECT_EQ(i.weight_bytes, 32LL * 64 + 32 * 4 + 32 * 4);  // codes, row scales, bias
    }
  }
  EXPECT_EQ(biased, 3 * c.n_layers);
  EXPECT_EQ(count(p, arch::Op::head_norm), 0);

  c = stories260k_config();
  c.arch = model::Arch::qwen3;
  c.qk_norm = true;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_size = 32;
  p = arch::build_program(c, d, arch::Stage::decode, 3, 1);
  EXPECT_EQ(count(p, arch::Op::head_norm), c.n_layers);
  for (std::size_t k = 0; k < p.instructions.size(); ++k) {
    const auto& i = p.instructions[k];
    if (i.name == "blk.1.wq") {
      EXPECT_EQ(i.rows, 128);
    }
    if (i.name == "blk.1.wo") {
      EXPECT_EQ(i.cols, 128);
    }
    if (i.name == "blk.1.wk") {
      EXPECT_EQ(i.rows, 64);
    }
    if (i.op == arch::Op::head_norm) {
      EXPECT_EQ(p.instructions[k - 1].linear, model::Linear::wv);
      EXPECT_EQ(p.instructions[k + 1].op, arch::Op::rope);
      EXPECT_EQ(i.head_dim, 32);
      EXPECT_EQ(i.heads, 4);
      EXPECT_EQ(i.kv_heads, 2);
      EXPECT_EQ(i.vector_elements(), 6 * 32);
      EXPECT_EQ(i.weight_bytes, 2 * 32 * 4);
    }
    if (i.op == arch::Op::quantize && i.in == arch::Buf::att) {
      EXPECT_EQ(i.cols, 128);
    }
  }
  // Mixture of experts stays out of the instruction list, with its reason.
  c.n_experts = 8;
  c.n_experts_active = 2;
  c.expert_hidden_dim = 32;
  try {
    arch::build_program(c, d, arch::Stage::decode, 3, 1);
    ADD_FAILURE() << "a MoE model was lowered";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("mixture of experts"), std::string::npos) << e.what();
  }
}

}  // namespace
