"""The simulated machines behave as real PyTorch does on such a machine, through every API."""
import copy
import io
import pkgutil
import sys
import types

import pytest
import torch
# as every grading kernel and verdict has it before any machine is simulated (PRELOADED, course/kernels/forkserver.py):
# a meta tensor's random fill imports it, and its import fails on the CPU build while a CUDA machine is simulated
import torch._dynamo  # noqa: F401

from autograder import simulate
from autograder.simulate import MACHINES, Machine, questions, simulated_accelerator, simulated_machine


APIS = {
    "torch.cuda.is_available()": lambda: torch.cuda.is_available(),
    "torch.backends.mps.is_available()": lambda: torch.backends.mps.is_available(),
    "torch.accelerator.is_available()": lambda: torch.accelerator.is_available(),
    "torch.accelerator.current_accelerator()": lambda: torch.accelerator.current_accelerator(),
    "torch.accelerator.current_accelerator(check_available=True)":
        lambda: torch.accelerator.current_accelerator(check_available=True),
    "torch.backends.cuda.is_built()": lambda: torch.backends.cuda.is_built(),
    "torch.backends.mps.is_built()": lambda: torch.backends.mps.is_built(),
    "torch.mps.device_count()": lambda: torch.mps.device_count(),
    "torch.version.cuda is not None": lambda: torch.version.cuda is not None,
    "torch.cuda.is_bf16_supported()": lambda: torch.cuda.is_bf16_supported(),
    "torch.backends.cudnn.is_available()": lambda: torch.backends.cudnn.is_available(),
    "torch.backends.cudnn.version() is not None": lambda: torch.backends.cudnn.version() is not None,
    "torch.distributed.is_nccl_available()": lambda: torch.distributed.is_nccl_available(),
}

# what a setup cell may do on a machine with a GPU (the lessons' sync debugging, a shared GPU's share, its stream
# and generator, seeding every device): each works where that GPU is simulated, and nowhere else
SETUP_CALLS = {
    "cuda": [lambda: torch.cuda.set_sync_debug_mode("warn"), lambda: torch.cuda.get_sync_debug_mode(),
             lambda: torch.cuda.set_per_process_memory_fraction(0.5), lambda: torch.cuda.current_stream().synchronize(),
             lambda: torch.cuda.get_rng_state()],
    "mps": [lambda: torch.mps.synchronize(), lambda: torch.mps.empty_cache(), lambda: torch.mps.get_rng_state(),
            lambda: torch.mps.current_allocated_memory(), lambda: torch.mps.set_per_process_memory_fraction(0.5)],
}


def seen(machine: Machine) -> dict:
    with simulated_machine(machine):
        return {name: ask() for name, ask in APIS.items()}


def real() -> dict:
    return {name: ask() for name, ask in APIS.items()}


def this_machine() -> Machine:
    present = ("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else None)
    built = "cuda" if torch.version.cuda else ("mps" if torch.backends.mps.is_built() else None)
    return Machine(present, built)


def test_the_simulation_of_this_machine_matches_the_real_pytorch():
    """On the CPU build and on the CUDA build without a GPU alike: what a student's code would see."""
    machine = this_machine()
    assert machine in MACHINES
    assert seen(machine) == real()


@pytest.mark.parametrize("machine", MACHINES, ids=str)
def test_runtime_checks_agree_on_what_is_present(machine):
    answers = seen(machine)
    assert answers["torch.cuda.is_available()"] == (machine.present == "cuda")
    assert answers["torch.backends.mps.is_available()"] == (machine.present == "mps")
    assert answers["torch.accelerator.is_available()"] == (machine.present is not None)
    assert answers["torch.cuda.is_bf16_supported()"] == (machine.present == "cuda")  # a simulated GPU is a recent one
    checked = answers["torch.accelerator.current_accelerator(check_available=True)"]
    assert (checked.type if checked else None) == machine.present


@pytest.mark.parametrize("machine", MACHINES, ids=str)
def test_current_accelerator_without_check_reports_the_build(machine):
    """The trap of torch 2.13: the bare call names the compile-time accelerator, present or not."""
    reported = seen(machine)["torch.accelerator.current_accelerator()"]
    assert (reported.type if reported else None) == machine.built


def test_the_cuda_build_without_a_gpu_is_one_of_the_machines():
    cuda_build_no_gpu = Machine(None, "cuda")
    assert cuda_build_no_gpu in MACHINES
    answers = seen(cuda_build_no_gpu)
    assert answers["torch.accelerator.current_accelerator()"] == torch.device("cuda")
    assert answers["torch.accelerator.current_accelerator(check_available=True)"] is None
    assert answers["torch.version.cuda is not None"] and answers["torch.backends.cuda.is_built()"]


def test_a_mac_whose_gpu_pytorch_cannot_use_is_one_of_the_machines():
    """Issue 41: `torch.backends.mps.is_built()` for `is_available()` kept its points with no such machine."""
    mac_without_mps = Machine(None, "mps")
    assert mac_without_mps in MACHINES
    answers = seen(mac_without_mps)
    assert answers["torch.backends.mps.is_built()"] and not answers["torch.backends.mps.is_available()"]
    assert answers["torch.accelerator.current_accelerator()"] == torch.device("mps")
    assert answers["torch.accelerator.current_accelerator(check_available=True)"] is None
    assert not answers["torch.accelerator.is_available()"] and answers["torch.mps.device_count()"] == 0


@pytest.mark.parametrize("machine", MACHINES, ids=str)
def test_a_simulated_mac_is_darwin_and_every_other_machine_linux(machine):
    """An answer that asks for the Apple GPU on macOS only (`platform.system() == "Darwin" and
    torch.backends.mps.is_available()`) keeps its points on the simulated Apple GPU."""
    import platform

    def asked():
        return (platform.system(), platform.machine(), platform.mac_ver(), platform.uname(), platform.platform(),
                platform.processor())

    real = asked()
    with simulated_machine(machine):
        system, kind, (release, _, mac_machine), uname, named, processor = asked()
    mac = machine.built == "mps"  # an Apple-silicon Mac, whose GPU a virtual machine cannot use
    assert (system, kind, bool(release)) == (("Darwin", "arm64", True) if mac else ("Linux", "x86_64", False))
    assert (uname.system, uname.machine) == (system, kind) and named.startswith("macOS" if mac else "Linux")
    assert mac_machine == ("arm64" if mac else "") and processor == ("arm" if mac else "x86_64")
    assert asked() == real


@pytest.mark.parametrize("machine", MACHINES, ids=str)
def test_sys_platform_and_os_uname_tell_the_simulated_system(machine):
    """`sys.platform == "darwin" and torch.backends.mps.is_available()` is how most Python code asks for the Apple
    GPU on macOS only (attacks-machines.toml: pick-device-asks-for-mps-where-sys-platform-says-darwin)."""
    import os
    import sys

    real = (sys.platform, os.uname())
    with simulated_machine(machine):
        platform_name, uname = sys.platform, os.uname()
        compared = sys.platform == "darwin"
    mac = machine.built == "mps"
    assert (platform_name, compared) == (("darwin", True) if mac else ("linux", False))
    assert (uname.sysname, uname.machine) == (("Darwin", "arm64") if mac else ("Linux", "x86_64"))
    assert (sys.platform, os.uname()) == real and type(sys.platform) is str


def test_reading_sys_platform_is_a_question_but_not_for_the_import_system():
    """A cell that reads `sys.platform` (`ON_MACOS = sys.platform == "darwin"`, or keeps it) runs again on every
    machine (`questions`), as one that calls `platform.system()` does; Python's import system, which reads it as it
    lists a folder, does not make a cell's first import the machine's. What it reads is a plain str: a student's
    checkpoint may keep it, and `torch.load(weights_only=True)` read it back."""
    import io
    import json
    import os
    import sys
    from importlib.machinery import FileFinder, SourceFileLoader

    with simulated_machine(Machine("mps", "mps")):
        before = questions()
        FileFinder(os.path.dirname(json.__file__), (SourceFileLoader, [".py"])).find_spec("json.tool")
        assert questions() == before
        kept = sys.platform
        assert questions() == before + 1
        saved = io.BytesIO()
        torch.save({"platform": kept}, saved)
    saved.seek(0)
    assert torch.load(saved, weights_only=True) == {"platform": "darwin"} and type(kept) is str


def test_everything_is_restored_afterwards():
    before = real()
    for machine in MACHINES:
        seen(machine)
    assert real() == before


@pytest.mark.parametrize("target", sorted({*simulate._REPLACEMENTS, *simulate._ON_AN_ACCELERATOR}))
def test_each_replacement_goes_where_mock_patch_would_put_it(target):
    """The simulation finds each patched object's owner itself (`_resolved`, without mock.patch's tries to import
    what is no module), and finds the one mock.patch would: a module as imported, even where a cell rebound the
    attribute that names it."""
    owner = target.rpartition(".")[0]
    assert simulate._resolved(owner) is pkgutil.resolve_name(owner)


def test_a_module_rebound_by_a_cell_is_still_the_one_simulated(monkeypatch):
    fake = types.SimpleNamespace(is_available=lambda: "the cell's")
    monkeypatch.setattr(torch, "cuda", fake)
    with simulated_accelerator("cuda"):
        assert sys.modules["torch.cuda"].is_available() is True and fake.is_available() == "the cell's"


@pytest.mark.parametrize("kind, built", [("cuda", "mps"), ("tpu", None), (None, "xla")])
def test_impossible_machines_are_refused(kind, built):
    with pytest.raises(ValueError):
        with simulated_accelerator(kind, built):
            pass


# the functions themselves, as a student's module-level table keeps them before any simulation
KEPT = {"torch.cuda.is_available": torch.cuda.is_available, "torch.backends.mps.is_available": torch.backends.mps.is_available,
        "torch.accelerator.is_available": torch.accelerator.is_available,
        "torch.accelerator.current_accelerator": torch.accelerator.current_accelerator,
        "torch.backends.cuda.is_built": torch.backends.cuda.is_built}


@pytest.mark.parametrize("machine", MACHINES, ids=str)
def test_a_function_kept_from_before_the_simulation_sees_it_too(machine):
    """Issue 41: `TABLE = [torch.cuda.is_available, ...]` at module level, called later, saw the real machine."""
    with simulated_machine(machine):
        kept = {name: function() for name, function in KEPT.items()}
        looked_up = {"torch.cuda.is_available": torch.cuda.is_available(),
                     "torch.backends.mps.is_available": torch.backends.mps.is_available(),
                     "torch.accelerator.is_available": torch.accelerator.is_available(),
                     "torch.accelerator.current_accelerator": torch.accelerator.current_accelerator(),
                     "torch.backends.cuda.is_built": torch.backends.cuda.is_built()}
    assert kept == looked_up
    assert KEPT["torch.backends.mps.is_available"]() == torch.backends.mps.is_available()  # no cached answer left


@pytest.mark.parametrize("outer", MACHINES, ids=str)
def test_a_machine_simulated_inside_another_is_that_machine_and_gives_the_outer_one_back(outer):
    """The verdict runs the student's cells on the students' usual machine inside a grader's simulated one."""
    inner = Machine(None, "cuda")
    with simulated_machine(outer):
        around = (torch.cuda.is_available(), torch.backends.mps.is_available(), torch.backends.cuda.is_built())
        with simulated_machine(inner):
            assert (torch.cuda.is_available(), torch.backends.mps.is_available()) == (False, False)
            assert torch.backends.cuda.is_built()
        assert (torch.cuda.is_available(), torch.backends.mps.is_available(), torch.backends.cuda.is_built()) == around


@pytest.mark.parametrize("later", MACHINES, ids=str)
def test_a_function_bound_while_one_machine_is_simulated_answers_for_the_machine_of_its_call(later):
    """A student's `from torch.cuda import is_available` in a cell the verdict runs on the students' machine
    answers for the machine a test simulates later, and for the real one outside any simulation."""
    real = (torch.cuda.is_available(), torch.backends.mps.is_available())
    with simulated_machine(Machine(None, None)):
        from torch.cuda import is_available as cuda_available
        mps_available = torch.backends.mps.is_available
    with simulated_machine(later):
        assert (cuda_available(), mps_available()) == (later.present == "cuda", later.present == "mps")
    assert (cuda_available(), mps_available()) == real


@pytest.mark.parametrize("read", [lambda: torch.version.cuda, lambda: __import__("torch.version").version.cuda],
                         ids=["attribute", "import"])
def test_reading_the_build_from_torch_version_is_a_question(read):
    """`CUDA_BUILD = torch.version.cuda is not None` depends on the machine as `torch.backends.cuda.is_built()` does:
    a cell that reads it runs again on another machine (autograder/verdict.py)."""
    from autograder.simulate import questions

    before = questions()
    assert read() == torch.version.cuda  # outside a simulation: the real build's, no question
    assert questions() == before
    with simulated_machine(Machine(None, "cuda")):
        assert read() == "13.0"
    assert questions() == before + 1


@pytest.mark.parametrize("machine", MACHINES, ids=str)
@pytest.mark.parametrize("gpu", SETUP_CALLS)
def test_what_a_setup_cell_does_with_a_gpu_works_where_that_gpu_is_simulated_only(machine, gpu):
    with simulated_machine(machine):
        for call in SETUP_CALLS[gpu]:
            if machine.present == gpu:
                call()
            else:
                with pytest.raises((RuntimeError, AssertionError)):
                    call()
        torch.manual_seed(0)  # seeds every device the build has, on every machine
        if machine.present:
            torch.accelerator.set_device_index(0)


@pytest.mark.parametrize("machine", MACHINES, ids=str)
def test_cudnn_and_nccl_come_with_the_cuda_build_gpu_or_not(machine):
    answers = seen(machine)
    assert answers["torch.backends.cudnn.is_available()"] == answers["torch.distributed.is_nccl_available()"] \
        == (machine.built == "cuda")


@pytest.mark.parametrize("machine", MACHINES, ids=str)
def test_torch_compile_on_a_simulated_machine_gives_the_code_as_it_is(machine):
    """Compiling would ask the grader's own machine (attacks-machines.toml,
    a-helper-compiled-with-torch-compile-and-tried-in-the-setup-cell); compiled code computes what eager code does."""
    def scale(x):
        return x * 2

    model = torch.nn.Linear(2, 2)
    with simulated_machine(machine):
        assert torch.compile(scale) is scale and torch.compile(mode="max-autotune")(scale) is scale
        assert torch.compile(model) is model
    assert torch.compile(scale) is not scale  # the real one again


def _in_device_context(device):
    with torch.device(device):
        return torch.randn(2)


def _with_default_device(device):
    torch.set_default_device(device)
    try:
        return torch.zeros(2)
    finally:
        torch.set_default_device(None)


def _loaded(device):
    saved = io.BytesIO()
    torch.save({"w": torch.ones(2)}, saved)
    saved.seek(0)
    return torch.load(saved, map_location=device, weights_only=True)["w"]


# by every way PyTorch makes a tensor on a device: those after `pinned`, each a right make_weight or load_for_inference
# of a reader of ordinary styles (attacks-machines.toml), lost its test before
MADE_THERE = {
    "ones": lambda d: torch.ones(1, device=d), "tensor": lambda d: torch.tensor([1.0, 2.0], device=d),
    "zeros_like": lambda d: torch.zeros_like(torch.ones(2), device=d),
    "new_zeros": lambda d: torch.ones(2).new_zeros(3, device=d),
    "pinned": lambda d: torch.empty(2, device=d, pin_memory=True),
    "normal": lambda d: torch.normal(0.0, 0.02, size=(2, 3), device=d),
    "asarray": lambda d: torch.asarray([1.0, 2.0], device=d), "hann_window": lambda d: torch.hann_window(4, device=d),
    "fft.fftfreq": lambda d: torch.fft.fftfreq(4, device=d), "device-context": _in_device_context,
    "set_default_device": _with_default_device, "torch.load-map_location": _loaded,
}


@pytest.mark.parametrize("make", MADE_THERE.values(), ids=MADE_THERE.keys())
@pytest.mark.parametrize("machine", [Machine("cuda", "cuda"), Machine("mps", "mps")], ids=str)
def test_a_tensor_made_on_the_simulated_accelerator_is_made_on_meta(make, machine):
    """attacks-machines.toml: pick-device-checks-that-a-tensor-can-be-made-there. A tensor made on the simulated
    accelerator has its shape and dtype and no values, on every grader; on the CPU it is what it was, pinned or not
    (page-locked memory needs the accelerator's driver), and so is a copy pinned afterwards."""
    with simulated_machine(machine):
        made, on_cpu, pinned = make(machine.present), make("cpu"), torch.arange(3.0).pin_memory()
    assert made.device == torch.device("meta") and on_cpu.device == torch.device("cpu")
    assert torch.equal(pinned, torch.arange(3.0))
    if {"cuda": torch.cuda.is_available, "mps": torch.backends.mps.is_available}[machine.present]():
        return  # a grader that has it
    with pytest.raises((RuntimeError, AssertionError, TypeError)):  # the grader has no such device
        make(machine.present)


CPU_GENERATOR = torch.Generator().manual_seed(0)
# each way a student may draw random values on device `d` with a generator `g` of their own
DRAWN_WITH = {
    "factory": lambda d, g: torch.randn(3, device=d, generator=g),
    "randint": lambda d, g: torch.randint(0, 5, (3,), device=d, generator=g),
    "in-place": lambda d, g: torch.empty(3, device=d).normal_(generator=g),
    "nn.init": lambda d, g: torch.nn.init.kaiming_uniform_(torch.empty(3, 3, device=d), generator=g),
    "nn.init-trunc-normal": lambda d, g: torch.nn.init.trunc_normal_(torch.empty(3, device=d), generator=g),
    "nn.init-orthogonal-by-position": lambda d, g: torch.nn.init.orthogonal_(torch.empty(3, 3, device=d), 1.0, g),
    # found by the attacker of the first version, which checked only a factory's `device=`
    "randn_like": lambda d, g: torch.randn_like(torch.empty(3, device=d), generator=g),
    "bernoulli": lambda d, g: torch.bernoulli(torch.full((3,), 0.5, device=d), generator=g),
    "multinomial": lambda d, g: torch.ones(3, device=d).multinomial(2, generator=g),
}
ACCELERATORS = [Machine("cuda", "cuda"), Machine("mps", "mps")]


@pytest.mark.parametrize("draw", DRAWN_WITH.values(), ids=DRAWN_WITH.keys())
@pytest.mark.parametrize("machine", ACCELERATORS, ids=str)
def test_a_simulated_accelerator_refuses_a_generator_of_another_device_as_a_real_one(draw, machine):
    """A GPU draws a tensor's values with a generator of its own device (a wrong make_weight passed on the CPU and
    meta, and raised on CUDA); drawn on the CPU and moved, or with the global generator, it works there."""
    with simulated_machine(machine), pytest.raises(RuntimeError, match=f"Expected a '{machine.present}' device type "
                                                                       "for generator but found 'cpu'"):
        draw(machine.present, CPU_GENERATOR)
    with simulated_machine(machine):
        assert torch.randn(3, generator=CPU_GENERATOR).to(machine.present).device.type == "meta"
        assert torch.randn(3, device=machine.present).device.type == "meta"
        assert draw("cpu", CPU_GENERATOR).device.type == "cpu"


@pytest.mark.parametrize("draw", DRAWN_WITH.values(), ids=DRAWN_WITH.keys())
@pytest.mark.parametrize("machine", ACCELERATORS, ids=str)
def test_a_generator_made_on_the_simulated_accelerator_draws_there_and_only_there(draw, machine):
    """`torch.Generator(device=device)`, as a right make_weight may draw on the device it was given: a real GPU
    takes it (the simulation refused it as a grader without that GPU does), and refuses it for a CPU tensor."""
    with simulated_machine(machine):
        generator = torch.Generator(device=machine.present).manual_seed(0)
        assert isinstance(generator, torch.Generator) and isinstance(CPU_GENERATOR, torch.Generator)
        assert generator.device == torch.device(machine.present, 0)
        assert copy.deepcopy(generator).device == generator.device  # a caller's pristine copy of the namespace
        assert draw(machine.present, generator).device.type == "meta"
        with pytest.raises(RuntimeError, match=f"Expected a 'cpu' device type for generator but found "
                                               f"'{machine.present}'"):
            draw("cpu", generator)


@pytest.mark.parametrize("machine", MACHINES, ids=str)
@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_a_generator_on_an_accelerator_the_simulated_machine_lacks_is_refused(machine, kind):
    """Whatever the grader has: a GPU grader without the sandbox made one, where the student's machine could not."""
    with simulated_machine(machine):
        if kind == machine.present:
            assert torch.Generator(kind).device.type == kind
            assert torch.Generator(torch.device(kind)).device.type == kind
        else:
            with pytest.raises(RuntimeError):
                torch.Generator(device=kind)
        assert torch.Generator().device.type == "cpu"


MOVES_OF_FLOAT64 = {  # of a float64 tensor `x` to the device `there`, where `ref` is a float32 tensor
    "to-the-device": (lambda x, ref, there: x.to(ref.device), False),
    "factory": (lambda x, ref, there: torch.zeros(2, dtype=torch.float64, device=there), False),
    "to-the-device-with-float64": (lambda x, ref, there: x.to(there, torch.float64), False),
    "to-ref": (lambda x, ref, there: x.to(ref), True),
    "to-the-device-and-float32": (lambda x, ref, there: x.to(ref.device, ref.dtype), True),
    "cast-then-move": (lambda x, ref, there: x.to(ref.dtype).to(ref.device), True),
    "float32-moved": (lambda x, ref, there: x.float().to(there), True),
    # found by the attacker of the first version, which checked only moves from another device
    "as-tensor-on-the-stand-ins-device": (lambda x, ref, there: torch.as_tensor(x, device=ref.device), False),
    "empty-like-in-float64": (lambda x, ref, there: torch.empty_like(ref, dtype=torch.float64), False),
    "stand-in-to-float64": (lambda x, ref, there: ref.to(torch.float64), False),
    "stand-in-double": (lambda x, ref, there: ref.double(), False),
}


@pytest.mark.parametrize("move, works", MOVES_OF_FLOAT64.values(), ids=MOVES_OF_FLOAT64.keys())
def test_a_simulated_apple_gpu_refuses_float64_as_a_real_one(move, works):
    """An Apple GPU has no float64 (lesson 01): a wrong `match` that moved a float64 tensor first, then cast it,
    passed everywhere the meta device took float64. Its stand-ins report the meta device (`ref.device`), so a move
    there from another device is a move to the GPU; on the CUDA machine each of these works."""
    x = torch.tensor([0.5, 1.5], dtype=torch.float64)
    with simulated_machine(Machine("cuda", "cuda")):
        move(x, torch.zeros(1, device="cuda"), "cuda")
    with simulated_machine(Machine("mps", "mps")):
        ref = torch.zeros(1, device="mps")
        if works:
            assert move(x, ref, "mps").dtype == torch.float32
        else:
            with pytest.raises(TypeError, match="MPS framework doesn't support float64"):
                move(x, ref, "mps")


def test_a_step_timed_with_cuda_events_and_a_side_stream_run_on_the_simulated_gpu():
    """Lesson 10 times a step with two CUDA events, lessons 07 and 08 queue work on a side stream
    (attacks-machines.toml: scaled-train-step-times-itself-with-cuda-events-as-lesson-10-does)."""
    with simulated_machine(Machine("cuda", "cuda")):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        side = torch.cuda.Stream()
        start.record()
        with torch.cuda.stream(side):
            made = torch.ones(2, device="cuda")
        torch.cuda.current_stream().wait_stream(side)
        end.record()
        torch.cuda.synchronize()
        assert start.elapsed_time(end) == 0.0 and made.device == torch.device("meta")
    with simulated_machine(Machine(None, "cuda")), pytest.raises(RuntimeError, match="NVIDIA driver"):
        torch.cuda.Event(enable_timing=True)


@pytest.mark.parametrize("pin", ["pin_memory", "factory"])
@pytest.mark.parametrize("grader", [None, "cuda"], ids=["grader-as-it-is", "cuda-grader"])
def test_pinned_memory_is_the_simulated_machines_whatever_the_graders(pin, grader):
    """attacks-machines.toml, pinned-memory-works-only-on-a-grader-with-a-gpu: page-locked memory works where the
    innermost simulated machine has an accelerator, and is refused as on a laptop where it has none, on a grader
    with a GPU (simulated around it all) as on one without. A factory's `pin_memory=True` is PyTorch's own where
    no accelerator is simulated at all (patching the factories there would break torch.jit.script): a real GPU
    grader pins it (README, "What a student's code can still misreport")."""
    from autograder.program import STUDENTS_MACHINE

    make = {"pin_memory": lambda: torch.arange(3.0).pin_memory(), "factory": lambda: torch.empty(2, pin_memory=True)}[pin]
    with simulated_accelerator(grader):
        with simulated_machine(Machine("cuda", "cuda")):
            make()
        if pin == "factory" and grader is None and torch.accelerator.is_available():
            return
        with simulated_machine(STUDENTS_MACHINE), pytest.raises(RuntimeError):  # PyTorch's words differ by build
            make()


def test_a_pinning_factory_kept_past_the_simulation_is_pytorchs_own():
    """A factory a cell kept while a GPU was simulated (`zeros = torch.zeros`), called after it: PyTorch's own
    `pin_memory=True`, which pins where the machine can and refuses where it cannot, as it would without a
    simulation."""
    with simulated_accelerator("cuda"):
        kept = torch.zeros
    if torch.accelerator.is_available():
        assert kept(2, pin_memory=True).is_pinned()
    else:
        with pytest.raises(RuntimeError, match="pin_memory=True requires|NVIDIA driver") as refused:
            kept(2, pin_memory=True)
        with pytest.raises(RuntimeError) as real:
            torch.zeros(2, pin_memory=True)
        assert str(refused.value) == str(real.value)

