"""`sanctum generate --prompts-file` as the prompt-cache suites drive it: one comma-separated prompt
per line, greedy to exactly max_tokens, with the per-prompt timing lines on stderr."""
import re
import subprocess

TIMING = re.compile(r"prompt (\d+) tokens \((\d+) from cache\)")


def generate_prompts(sanctum_bin, model_dir, prompts, tmp_path, max_tokens, flags, timeout):
    """(outputs as id lists, prompt tokens served from the cache for each prompt, stderr)."""
    f = tmp_path / "prompts.txt"
    f.write_text("\n".join(",".join(map(str, p)) for p in prompts) + "\n")
    r = subprocess.run([sanctum_bin, "generate", "--model", str(model_dir), "--prompts-file", str(f), "--max-tokens",
                        str(max_tokens), "--ignore-eos", "--timing", *flags], check=True, capture_output=True, text=True,
                       timeout=timeout)
    outs = [[int(t) for t in line.split(",")] for line in r.stdout.strip().split("\n")]
    reused = [int(m.group(2)) for m in TIMING.finditer(r.stderr)]
    return outs, reused, r.stderr
