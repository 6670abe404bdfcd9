"""`samebits.embed` on all-MiniLM-L6-v2 against `samebits embed`: the same texts give the same
embedding bits, and its receipt verifies with the command."""

import numpy as np
import pytest

import samebits

TEXTS = ["The cat sits on the mat.", "A kitten rests on a rug."]


def test_embeddings_equal_the_cli_and_verify(minilm, run_cli, tmp_path):
    args = [arg for text in TEXTS for arg in ("--text", text)]
    run_cli("embed", "--model", minilm, *args, "--out", tmp_path / "cli.npy")
    expected = np.load(tmp_path / "cli.npy")
    embeddings = samebits.embed(minilm, TEXTS, receipt=tmp_path / "emb.json")
    assert embeddings.dtype == np.float32 and embeddings.shape == expected.shape
    assert embeddings.tobytes() == expected.tobytes()
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, rtol=1e-6)
    assert "verified" in run_cli("verify", tmp_path / "emb.json").stdout
    assert samebits.verify(tmp_path / "emb.json").status == "match"


def test_normalize_must_agree_with_the_folder(minilm):
    with pytest.raises(ValueError, match="normalize=False"):
        samebits.embed(minilm, TEXTS, normalize=False)
    with pytest.raises(ValueError, match="sequence of strings"):
        samebits.embed(minilm, "one text")
