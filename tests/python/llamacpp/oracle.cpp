// llama.cpp as an oracle for test_qwen_llamacpp.py, through libllama's C API only (the
// vendored llama.cpp c392e50): the prompt's token ids from llama_tokenize (add_special as
// the file says; parse_special on, or off with --no-parse-special: the switch that
// llama-tokenize --no-parse-special turns), then greedy decoding up to POSITIONS positions,
// prompt included: the prompt in one batch, then one token at a time, each the argmax of the
// last logits (the lowest id among equals), stopping after an end-of-generation token
// (llama_vocab_is_eog). POSITIONS 0: the prompt's ids only.
// --chat: the prompt file is one user message, wrapped by llama_chat_apply_template with
// the file's tokenizer.chat_template and the assistant's turn opened.
// The KV cache is F32 (llama.cpp's default is F16) and one thread runs, so that only the
// weights' storage type and ggml's own activation conversions separate its arithmetic from
// fpgallm's.
// Prints one JSON object: n_vocab, prompt (ids), generated (ids), prompt_logits (the logits
// at each prompt position but the last, all of the vocabulary), logits (each generated
// token's step). Exits 3, llama.cpp's log on stderr, when the file does not load (an
// architecture this llama.cpp does not know).
// Usage: llamacpp_oracle MODEL.gguf PROMPT_FILE POSITIONS [--no-parse-special] [--chat]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPT_FILE POSITIONS [--no-parse-special] [--chat]\n", argv[0]);
    return 2;
  }
  bool parse_special = true, chat = false;
  for (int i = 4; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-parse-special") == 0) parse_special = false;
    else if (std::strcmp(argv[i], "--chat") == 0) chat = true;
    else { std::fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string prompt = ss.str();
  const int positions = std::atoi(argv[3]);

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) { std::fprintf(stderr, "llamacpp_oracle: llama.cpp cannot load %s\n", argv[1]); return 3; }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  if (chat) {
    const char* tmpl = llama_model_chat_template(model, nullptr);
    llama_chat_message msg{"user", prompt.c_str()};
    std::vector<char> buf(prompt.size() * 2 + 256);
    int n = llama_chat_apply_template(tmpl, &msg, 1, true, buf.data(), static_cast<int>(buf.size()));
    if (n > static_cast<int>(buf.size())) {
      buf.resize(static_cast<std::size_t>(n));
      n = llama_chat_apply_template(tmpl, &msg, 1, true, buf.data(), n);
    }
    if (n < 0) { std::fprintf(stderr, "llamacpp_oracle: llama_chat_apply_template failed\n"); return 4; }
    prompt.assign(buf.data(), static_cast<std::size_t>(n));
  }

  const int n_prompt = -llama_tokenize(vocab, prompt.data(), static_cast<int>(prompt.size()), nullptr, 0, true, parse_special);
  std::vector<llama_token> tokens(static_cast<std::size_t>(n_prompt));
  if (llama_tokenize(vocab, prompt.data(), static_cast<int>(prompt.size()), tokens.data(), n_prompt, true, parse_special) != n_prompt) {
    std::fprintf(stderr, "llamacpp_oracle: llama_tokenize failed\n");
    return 4;
  }

  std::vector<llama_token> generated;
  std::vector<std::vector<float>> step_logits, prompt_logits;
  if (positions > n_prompt && n_prompt > 0) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = static_cast<uint32_t>(positions);
    cp.n_batch = static_cast<uint32_t>(positions);
    cp.n_threads = cp.n_threads_batch = 1;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) { std::fprintf(stderr, "llamacpp_oracle: llama_init_from_model failed\n"); return 4; }
    // The prompt in one batch with the logits of every position; then one token at a time.
    llama_batch prompt_batch = llama_batch_init(n_prompt, 0, 1);
    for (int i = 0; i < n_prompt; ++i) {
      prompt_batch.token[i] = tokens[static_cast<std::size_t>(i)];
      prompt_batch.pos[i] = i;
      prompt_batch.n_seq_id[i] = 1;
      prompt_batch.seq_id[i][0] = 0;
      prompt_batch.logits[i] = 1;
    }
    prompt_batch.n_tokens = n_prompt;
    llama_batch batch = prompt_batch;
    for (int pos = n_prompt; pos < positions; ++pos) {
      if (llama_decode(ctx, batch) != 0) { std::fprintf(stderr, "llamacpp_oracle: llama_decode failed\n"); return 4; }
      if (pos == n_prompt)
        for (int i = 0; i + 1 < n_prompt; ++i) {
          const float* l = llama_get_logits_ith(ctx, i);
          prompt_logits.emplace_back(l, l + n_vocab);
        }
      const float* logits = llama_get_logits_ith(ctx, -1);
      step_logits.emplace_back(logits, logits + n_vocab);
      llama_token best = 0;
      for (llama_token v = 1; v < n_vocab; ++v)
        if (logits[v] > logits[best]) best = v;
      generated.push_back(best);
      if (llama_vocab_is_eog(vocab, best)) break;
      batch = llama_batch_get_one(&generated.back(), 1);
    }
    llama_batch_free(prompt_batch);
    llama_free(ctx);
  }

  auto ids = [](const std::vector<llama_token>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  auto rows = [n_vocab](const std::vector<std::vector<float>>& m) {
    std::string s = "[";
    char num[32];
    for (std::size_t r = 0; r < m.size(); ++r) {
      s += r ? ",[" : "[";
      for (int v = 0; v < n_vocab; ++v) {
        std::snprintf(num, sizeof num, v ? ",%.9g" : "%.9g", static_cast<double>(m[r][static_cast<std::size_t>(v)]));
        s += num;
      }
      s += "]";
    }
    return s + "]";
  };
  std::printf("{\"n_vocab\":%d,\"prompt\":%s,\"generated\":%s,\"prompt_logits\":%s,\"logits\":%s", n_vocab,
              ids(tokens).c_str(), ids(generated).c_str(), rows(prompt_logits).c_str(), rows(step_logits).c_str());
  std::printf("}\n");
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
