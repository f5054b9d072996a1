#!/bin/bash
# Writes data/checkpoints/gpu_* (issue 28): the fixtures of make_quant_checkpoints.py,
# make_quant_checkpoints_more.py and make_moe_checkpoints.py (gpu_moe_*), quantised by ModelOpt 0.47.0 and compressed-tensors 0.20.0 with
# the model on CUDA, plus scripts/probe_cuda_div.py's probe of torch's CUDA division.
# Run from the repository root on a GPU machine whose Python has torch, transformers and triton;
# SITE: a folder with nvidia-modelopt 0.47.0, compressed-tensors 0.20.0 and their pure-Python
# dependencies (pydantic, loguru, omegaconf, pulp, ...; `pip download --no-deps` + unzip).
#   SITE=/path/to/site OUT=/tmp/gpu bash scripts/make_gpu_checkpoints.sh
# Then copy $OUT/ckpt/gpu_* to data/checkpoints/ (less gpu_modelopt_w4a8_g128, which the exporter refuses).
# The run of record: data/checkpoints/README.md.
set -u
O=${OUT:-/tmp/gpu_checkpoints}
R=$PWD
mkdir -p "$O/ckpt"
export PYTHONPATH=${SITE:?set SITE}${PYTHONPATH:+:$PYTHONPATH}
python3 -c 'import sys, torch, transformers, modelopt, compressed_tensors; print(sys.version.split()[0], torch.__version__, transformers.__version__, modelopt.__version__, compressed_tensors.__version__, torch.cuda.get_device_name())'
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd /tmp  # the scripts import nothing from the repository
# the two scripts at once (one GPU): they write different folders
python3 "$R/scripts/make_quant_checkpoints.py" "$O/ckpt" --device cuda --prefix gpu_ --original "$R/data/checkpoints/original" > "$O/log1.txt" 2>&1 &
python3 "$R/scripts/make_quant_checkpoints_more.py" "$O/ckpt" --device cuda --prefix gpu_ --original "$R/data/checkpoints/original" > "$O/log2.txt" 2>&1; echo rc2=$?
wait $!; echo rc1=$?
python3 "$R/scripts/probe_cuda_div.py" "$O/probe_div.json"
# the MoE fixtures (a later run of record, data/checkpoints/README.md): the models get the weights
# of moe_original and moe_mixtral_original
python3 "$R/scripts/make_moe_checkpoints.py" "$O/ckpt" --device cuda --prefix gpu_ --original "$R/data/checkpoints" > "$O/log_moe.txt" 2>&1; echo rc_moe=$?
ls "$O/ckpt"
