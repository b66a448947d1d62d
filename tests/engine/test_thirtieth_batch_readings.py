"""Batch 30's one miss: TensorFlow's XLA stream executor finding an older cuDNN at run time than the one it was built
with ('Loaded runtime CuDNN library: 8.0.5 but source was compiled with: 8.6.0'), at the first convolution of epoch 1,
then 'DNN library is not found' and the Keras traceback (1513). No real run: there is no GPU here; the catalog's own
examples hold the line and its neighbours apart."""

from __future__ import annotations

from tests.engine.batchcase import case, verdict


def test_a_runtime_cudnn_older_than_the_build_is_the_environment_public_log():
    assert verdict(case("1513")) == ("cuda-runtime", "crashed")
