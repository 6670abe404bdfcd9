"""`samebits.generate`, `generate_stream` and `verify` on SmolLM2-135M (Q4_1 GGUF) against the
`samebits` command: the same prompt and options give the same tokens and text, generation
receipts made on one side verify on the other, a changed token is found at its step, a receipt
whose model changed is unusable, and bad options raise ValueError."""

import json

import pytest

import samebits

PROMPT = "The capital of France is"
MAX_TOKENS = 8


@pytest.fixture(scope="module")
def cli_generation(smollm2, run_cli, tmp_path_factory):
    """The command's greedy generation: its stdout text and receipt."""
    folder = tmp_path_factory.mktemp("cli")
    done = run_cli("generate", "--model", smollm2, "--prompt", PROMPT,
                   "--max-tokens", MAX_TOKENS, "--receipt", folder / "gen.json")
    return done.stdout, folder / "gen.json"


@pytest.fixture(scope="module")
def py_generation(smollm2, tmp_path_factory):
    folder = tmp_path_factory.mktemp("py")
    return samebits.generate(smollm2, PROMPT, max_tokens=MAX_TOKENS, receipt=folder / "gen.json")


def test_greedy_generation_equals_the_cli(py_generation, cli_generation):
    cli_text, cli_receipt_path = cli_generation
    cli_receipt = json.loads(cli_receipt_path.read_text())
    assert py_generation.tokens == cli_receipt["tokens"]
    assert py_generation.prompt_tokens == cli_receipt["prompt_tokens"]
    assert len(py_generation.tokens) == MAX_TOKENS
    # The command prints the text and one newline.
    assert py_generation.text == cli_text[:-1]
    assert py_generation.text.strip()
    receipt = py_generation.receipt
    assert receipt["step_logits_sha256"] == cli_receipt["step_logits_sha256"]
    assert receipt["logits_digest"] == cli_receipt["logits_digest"]
    assert json.loads(open(py_generation.receipt_path).read()) == receipt


def test_receipts_verify_across_the_package_and_the_cli(py_generation, cli_generation, run_cli):
    done = run_cli("verify", py_generation.receipt_path)
    assert f"verified: all {MAX_TOKENS} generated tokens" in done.stdout
    verification = samebits.verify(cli_generation[1])
    assert verification.status == "match" and verification.kind == "generation"
    assert verification.steps_matched == MAX_TOKENS and verification.step is None


def test_a_changed_token_differs_at_its_step(py_generation, run_cli, tmp_path):
    receipt = dict(py_generation.receipt)
    receipt["model"] = dict(receipt["model"])
    receipt["model"]["path"] = str(
        (py_generation.receipt_path.parent / receipt["model"]["path"]).resolve()
    )
    tokens = list(receipt["tokens"])
    tokens[3] = (tokens[3] + 1) % 1000
    receipt["tokens"] = tokens
    (tmp_path / "tampered.json").write_text(json.dumps(receipt))
    verification = samebits.verify(tmp_path / "tampered.json")
    assert verification.status == "differ"
    assert verification.step == 3 and verification.steps_matched == 3
    assert f"the receipt records {tokens[3]}" in verification.message
    done = run_cli("verify", tmp_path / "tampered.json", check=False)
    assert done.returncode == 1 and "step 3" in done.stdout


def test_a_receipt_of_another_model_is_unusable(py_generation, run_cli, tmp_path):
    receipt = dict(py_generation.receipt)
    receipt["model"] = {"path": str((tmp_path / "other.gguf")), "sha256": "0" * 64}
    (tmp_path / "other.gguf").write_bytes(b"GGUF")
    (tmp_path / "gen.json").write_text(json.dumps(receipt))
    verification = samebits.verify(tmp_path / "gen.json")
    assert verification.status == "unusable"
    assert "model sha256 is" in verification.message
    assert run_cli("verify", tmp_path / "gen.json", check=False).returncode == 2


def test_sampling_equals_the_cli_and_the_stream_equals_the_whole(smollm2, run_cli, tmp_path):
    options = dict(max_tokens=10, temperature=0.8, top_k=40, top_p=0.9, seed=7)
    run_cli("generate", "--model", smollm2, "--prompt", "Once upon a time",
            "--max-tokens", 10, "--temperature", 0.8, "--top-k", 40, "--top-p", 0.9,
            "--seed", 7, "--receipt", tmp_path / "cli.json")
    cli_tokens = json.loads((tmp_path / "cli.json").read_text())["tokens"]
    stream = samebits.generate_stream(smollm2, "Once upon a time", **options)
    assert stream.result is None
    pieces = list(stream)
    assert len(pieces) > 1
    assert stream.result.tokens == cli_tokens
    assert "".join(pieces) == stream.result.text
    assert list(stream) == []


def test_bad_options_raise_value_errors(smollm2, tmp_path):
    with pytest.raises(ValueError, match="--temperature must be a finite number >= 0"):
        samebits.generate(smollm2, PROMPT, temperature=-1.0)
    with pytest.raises(ValueError, match="--top-p must lie in"):
        samebits.generate_stream(smollm2, PROMPT, top_p=0.0)
    with pytest.raises(ValueError, match="max_tokens must be an integer >= 0"):
        samebits.generate(smollm2, PROMPT, max_tokens=-1)
    with pytest.raises(ValueError, match="unknown device"):
        samebits.generate(smollm2, PROMPT, device="tpu")
    with pytest.raises(FileNotFoundError):
        samebits.generate(tmp_path / "missing.gguf", PROMPT)
