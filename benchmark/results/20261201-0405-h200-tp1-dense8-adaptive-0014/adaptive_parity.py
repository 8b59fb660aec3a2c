"""Greedy parity of EAGLE-3 with --speculative-adaptive (real acceptance) against no speculation."""
import sys, time


def run(model: str, spec: bool, prompts, max_new: int):
    import sglang
    kw = dict(model_path=f"{model}/target", attention_backend="triton", sampling_backend="pytorch",
              grammar_backend="none", skip_tokenizer_init=True, context_length=448, max_running_requests=64,
              mem_fraction_static=0.8, log_level="warning")
    if spec:
        kw.update(speculative_algorithm="EAGLE3", speculative_draft_model_path=f"{model}/draft",
                  speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
                  speculative_adaptive=True)
    eng = sglang.Engine(**kw)
    outs = {}
    for bs in (1, 8, 64):
        t0 = time.time()
        res = eng.generate(input_ids=prompts[:bs], sampling_params={"temperature": 0, "max_new_tokens": max_new})
        outs[bs] = [r["output_ids"] for r in res]
        acc = [r["meta_info"].get("spec_accept_length") for r in res][:2]
        print(f"PARITY {'adaptive' if spec else 'nospec'} bs={bs} {time.time()-t0:.2f}s accept={acc}", flush=True)
    eng.shutdown()
    return outs


def main() -> None:
    model = sys.argv[1]
    prompts = [[(13 * i + 7 * j) % 3000 + 10 for j in range(96 + i)] for i in range(64)]
    base = run(model, False, prompts, 160)
    spec = run(model, True, prompts, 160)
    for bs in base:
        same = sum(a == b for a, b in zip(base[bs], spec[bs]))
        print(f"PARITY bs={bs}: {same}/{len(base[bs])} identical", flush=True)


if __name__ == "__main__":
    main()
