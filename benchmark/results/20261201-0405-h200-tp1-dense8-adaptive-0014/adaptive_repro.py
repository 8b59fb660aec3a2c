"""Start an EAGLE-3 Engine (optionally --speculative-adaptive) as benchmark/e2e.py does, generate, report."""
import sys, time, traceback


def main() -> None:
    import sglang

    model, label, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    steps, ndt = (7, 8) if mode == "fixed8" else (3, 4)
    t0 = time.time()
    try:
        eng = sglang.Engine(model_path=f"{model}/target", speculative_algorithm="EAGLE3",
                            speculative_draft_model_path=f"{model}/draft", speculative_num_steps=steps,
                            speculative_eagle_topk=1, speculative_num_draft_tokens=ndt,
                            speculative_adaptive=(mode == "adaptive"),
                            attention_backend="triton", sampling_backend="pytorch", grammar_backend="none",
                            skip_tokenizer_init=True, context_length=448, max_running_requests=64,
                            mem_fraction_static=0.85, log_level="info")
        for bs in (1, 8):
            out = eng.generate(input_ids=[[(7 * i + j) % 1000 + 10 for j in range(128)] for i in range(bs)],
                               sampling_params={"temperature": 0, "max_new_tokens": 64})
            acc = [o["meta_info"].get("spec_verify_ct") for o in out]
            print(f"ADAPTIVE {label} bs={bs} OK verify_ct={acc}", flush=True)
        eng.shutdown()
        print(f"ADAPTIVE {label} PASS in {time.time() - t0:.0f}s", flush=True)
    except Exception as exc:
        print(f"ADAPTIVE {label} FAIL in {time.time() - t0:.0f}s: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
        traceback.print_exc()


if __name__ == "__main__":
    main()
