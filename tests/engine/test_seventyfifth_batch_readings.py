"""Batch 75's abstention read as a general behaviour (scored at 9137340 before any change): XLA's own words for a graph it
cannot compile for the device ('Detected unsupported operations when trying to compile graph ... on XLA_TPU_JIT: Const
(No registered 'Const' OpKernel for XLA_TPU_JIT devices ...)') name a model the device cannot run - a configuration
error - wherever the line stands: 2181 (EfficientDet's float16 constants on a TPU, the line inside TPUEstimator's
'Error recorded from training_loop' after an outfeed error) abstained; 2182 (the same words in a traceback's exception)
was right only through the unclassified-exception fallback, at 0.74.

Both logs are verbatim public reports (no TPU here to run one); the signature's own examples and non-examples (XLA's
start-up lines) are checked by tests/catalog/test_signatures.py."""

from __future__ import annotations

from tests.engine.batchcase import case, verdict


def test_xlas_unsupported_operations_on_the_device_are_a_configuration_error():
    assert verdict(case("2181")) == ("config-error", "crashed")
    assert verdict(case("2182")) == ("config-error", "crashed")
