"""Assertion helpers for graders and tests, in one namespace: `checks.assert_device(...)`.

Each helper raises AssertionError whose message states what was expected, what was found, and the likely
mistake with its fix: an English line, then a Chinese line (texts in messages.json). Every helper sets
`__tracebackhide__`, which IPython and pytest honour, so a failure shows the student's code and the
diagnostic rather than the grader's own frames.

The helpers live by what they inspect:

    core.py         call (a student's function), _fail, KNOWN_ERRORS, a tensor's device and dtype
    tensors.py      one tensor or a nested batch: type, device, dtype, shape, values, autograd graph
    modules.py      a module: parameters and buffers, modes and state, the audit of a model and its batch
    training.py     a training step: gradients, mixed precision, a 16-bit forward pass
    data.py         data and its movement: rows, transfers, loaders, NumPy, each rank's samples
    checkpoints.py  checkpoints across devices and ranks: map_location, the rank-0 checkpoint
"""
# `_fail` stays in this namespace: a submission that replaces `checks._fail` is one of the forgeries the
# grader must catch (course/corpus/forgeries.toml); the other private helpers live only in their modules.
from .core import call, _fail, host_reads_fail_on_meta, KNOWN_ERRORS
from .tensors import (assert_argument_kept, assert_batch_moved, assert_batch_unchanged, batch_items, assert_device,
    assert_device_choice, assert_draws_differ, assert_dtype, assert_grad_connected, assert_grad_left_off, assert_is,
    assert_leaf, assert_one_per_batch, assert_random, assert_requires_grad, assert_shape, assert_standard_normal, assert_tensor,
    assert_torch_device, assert_values)
from .modules import (assert_audit, assert_buffer, assert_eval, assert_fixed_tensor, assert_modes,
    assert_module, assert_module_on, assert_none, assert_raises, assert_state_unchanged, assert_stripped,
    assert_structure, submodule_paths)
from .training import (assert_16_bit_forward, assert_amp_gradients, assert_autocast, assert_detached,
    assert_gradients, assert_outside_autocast, assert_scale, assert_step_skipped, assert_updated)
from .data import (assert_epochs_differ, assert_global_rng_kept, assert_overlapped_copy, assert_loader_kwargs,
    assert_made_on_device, assert_ndarray, assert_rows_of, assert_same_shard, assert_seeds_differ, assert_shards,
    assert_shuffled, assert_transfers, sampled_indices, sampled_shard)
from .checkpoints import (assert_loads_on_rank, assert_map_location, assert_rank_zero_checkpoint,
    restored_locations)
