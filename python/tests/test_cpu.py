"""What runs without a GPU: import, op registration, fake-tensor shapes, every argument error,
and, with CPU stand-in kernels (cpu_kernels.py), the autograd wiring, opcheck, gradcheck and
torch.compile(fullgraph=True)."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import ascan
from ascan.reference import scan_loop
from layers import HGRNLayer

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def any_build(monkeypatch):
    """These tests do not run the CUDA kernels: they hold whatever dtypes ascan._C was built with
    (ASCAN_DTYPES) as all four, except where a test sets its own."""
    from ascan import _ext

    monkeypatch.setattr(_ext, "compiled_dtypes", lambda: None)


# ---- import and registration -----------------------------------------------------------------


def test_import_and_metadata(monkeypatch):
    monkeypatch.undo()
    assert ascan.__version__
    assert callable(ascan.scan)
    built = ascan.compiled_dtypes()
    assert built is None or set(built) <= {"float32", "float64", "float16", "bfloat16"}
    if not torch.cuda.is_available():
        assert ascan.is_available() is False


def test_ops_registered():
    fwd = torch.ops.ascan.scan_fwd.default
    bwd = torch.ops.ascan.scan_bwd.default
    assert str(fwd._schema) == (
        "ascan::scan_fwd(Tensor gates, Tensor tokens, Tensor? initial_state, Tensor? cu_seqlens, "
        "bool reverse, bool channel_last, bool need_final_state=True) -> (Tensor, Tensor)")
    assert str(bwd._schema).startswith(
        "ascan::scan_bwd(Tensor gates, Tensor states, Tensor grad_out, Tensor? initial_state, "
        "Tensor? grad_final_state, Tensor? cu_seqlens, bool reverse, bool channel_last, "
        "bool need_grad_initial_state)")
    # functional ops: nothing mutated, so torch.compile may reorder and CUDA graphs may capture
    assert not any(a.is_write for a in fwd._schema.arguments if a.alias_info)
    assert torch._C._dispatch_has_kernel_for_dispatch_key(fwd.name(), "CUDA")
    assert torch._C._dispatch_has_kernel_for_dispatch_key(fwd.name(), "Autograd")
    assert torch._C._dispatch_has_kernel_for_dispatch_key(bwd.name(), "CUDA")


def test_final_state_only_when_asked(cpu_ops, monkeypatch):
    # ascan.scan asks the kernels for the final state only where it returns it, so that calls
    # without states take the kernels that have no state code; the op gives (0, 0) without it
    from ascan import _ops

    seen = []
    fwd, bwd = _ops._EAGER_KERNELS["cpu"]

    def spy(*args):
        seen.append(args[-1])
        return fwd(*args)

    monkeypatch.setitem(_ops._EAGER_KERNELS, "cpu", (spy, bwd))
    g = torch.rand(2, 3, 5)
    x = torch.randn(2, 3, 5)
    out = ascan.scan(g, x)
    out2, h = ascan.scan(g, x, return_final_state=True)
    out3 = ascan.scan(g.requires_grad_(), x)
    out3.sum().backward()
    assert seen == [False, True, False]
    assert torch.equal(out, out2) and torch.equal(out, out3.detach()) and h.shape == (2, 3)
    o, f = torch.ops.ascan.scan_fwd(g.detach(), x, None, None, False, False, False)
    assert torch.equal(o, out) and f.shape == (0, 0)
    o, f = torch.ops.ascan.scan_fwd(g.detach(), x, None, None, False, False)
    assert f.shape == (2, 3)
    # through the op's own autograd (as under torch.compile), whose unused (0, 0) final state
    # comes back with a gradient of zeros: the same gradients as the eager path
    g1 = g.detach().clone().requires_grad_()
    o, f = torch.ops.ascan.scan_fwd(g1, x, None, None, False, False, False)
    o.sum().backward()
    g2 = g.detach().clone().requires_grad_()
    ascan.scan(g2, x).sum().backward()
    assert f.shape == (0, 0) and torch.equal(g1.grad, g2.grad)


def test_shim_modules():
    from ascan.accelerated_scan import scalar, scan, warp

    assert warp.scan is scan and scalar.scan is scan


def test_unbuilt_extension_message(monkeypatch):
    from ascan import _ext

    monkeypatch.setattr(_ext, "_module", None)
    monkeypatch.setattr(_ext, "_dtypes", None)
    monkeypatch.setattr(_ext, "_error", ImportError("no module named ascan._C"))
    with pytest.raises(RuntimeError, match="pip install --no-build-isolation"):
        _ext.load()
    assert _ext.compiled_dtypes() is None


# ---- fake tensors: shapes, dtypes, strides -------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["bct", "btc"])
def test_fake_shapes(dtype, layout):
    with FakeTensorMode():
        shape = (3, 5, 7) if layout == "bct" else (3, 7, 5)
        g = torch.empty(shape, device="cuda", dtype=dtype)
        x = torch.empty(shape, device="cuda", dtype=dtype)
        h0 = torch.empty(3, 5, device="cuda", dtype=dtype)
        out, h = ascan.scan(g, x, initial_state=h0, return_final_state=True, layout=layout)
        assert out.shape == shape and out.dtype == dtype and out.device.type == "cuda"
        assert out.is_contiguous()
        assert h.shape == (3, 5) and h.dtype == dtype and h.is_contiguous()
        assert ascan.scan(g, x, layout=layout).shape == shape


def test_fake_output_layout_follows_tokens():
    with FakeTensorMode():
        # (B, C, T) views of channel-last memory: the output stays channel-last
        g = torch.empty(2, 9, 4, device="cuda").transpose(1, 2)
        x = torch.empty(2, 9, 4, device="cuda").transpose(1, 2)
        out = ascan.scan(g, x)
        assert out.shape == (2, 4, 9) and out.stride() == x.stride()
        # tokens a half of a fused projection (not dense): a contiguous output
        proj = torch.empty(2, 9, 8, device="cuda")
        g, x = proj[..., :4], proj[..., 4:]
        out = ascan.scan(g, x, layout="btc")
        assert out.shape == (2, 9, 4) and out.is_contiguous()
        # broadcast gates (stride 0) are accepted as they are
        g = torch.empty(2, 4, 1, device="cuda").expand(2, 4, 9)
        out = ascan.scan(g, torch.empty(2, 4, 9, device="cuda"))
        assert out.shape == (2, 4, 9)


@pytest.mark.parametrize("layout", ["bct", "btc"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_fake_packed(layout, index_dtype):
    with FakeTensorMode():
        shape = (1, 6, 50) if layout == "bct" else (1, 50, 6)
        g = torch.empty(shape, device="cuda")
        cu = torch.empty(5, device="cuda", dtype=index_dtype)
        h0 = torch.empty(4, 6, device="cuda")
        out, h = ascan.scan(g, g, cu_seqlens=cu, initial_state=h0, return_final_state=True,
                            layout=layout)
        assert out.shape == shape and h.shape == (4, 6)


def test_fake_backward_op():
    with FakeTensorMode():
        a = torch.empty(2, 3, 8, device="cuda", dtype=torch.bfloat16)
        h0 = torch.empty(2, 3, device="cuda", dtype=torch.bfloat16)
        ga, gb, gh0 = torch.ops.ascan.scan_bwd(a, a, a, h0, h0, None, False, False, True)
        assert ga.shape == gb.shape == (2, 3, 8) and gh0.shape == (2, 3)
        assert ga.dtype == torch.bfloat16
        _, _, gh0 = torch.ops.ascan.scan_bwd(a, a, a, None, None, None, True, False, False)
        assert gh0.numel() == 0


# ---- argument errors, raised in Python before anything runs ---------------------------------


def _fake_cuda(*shape, dtype=torch.float32, device="cuda"):
    return torch.empty(*shape, device=device, dtype=dtype)


@pytest.fixture
def fake():
    with FakeTensorMode() as mode:
        yield mode


def test_error_cpu_tensors():
    g = torch.rand(2, 3, 4)
    with pytest.raises(ValueError, match=r"gates is on cpu.*CUDA tensors only"):
        ascan.scan(g, g)


def test_error_cpu_tokens(fake):
    with pytest.raises(ValueError, match="tokens is on cpu"):
        ascan.scan(_fake_cuda(2, 3, 4), torch.empty(2, 3, 4, device="cpu"))


def test_error_other_gpu(fake):
    if torch.cuda.is_available() and torch.cuda.device_count() < 2:
        pytest.skip("a fake cuda:1 tensor needs a second GPU where a GPU is visible")
    with pytest.raises(ValueError, match="tokens is on cuda:1 but gates is on cuda:0"):
        ascan.scan(_fake_cuda(2, 3, 4, device="cuda:0"), _fake_cuda(2, 3, 4, device="cuda:1"))


def test_error_not_tensors(fake):
    with pytest.raises(TypeError, match="gates must be a torch.Tensor"):
        ascan.scan([1.0], _fake_cuda(2, 3, 4))
    with pytest.raises(TypeError, match="tokens must be a torch.Tensor"):
        ascan.scan(_fake_cuda(2, 3, 4), 1.0)


def test_error_dtype_mismatch(fake):
    with pytest.raises(TypeError, match="tokens has dtype float16 but gates has float32"):
        ascan.scan(_fake_cuda(2, 3, 4), _fake_cuda(2, 3, 4, dtype=torch.float16))


def test_error_unsupported_dtype(fake):
    with pytest.raises(TypeError, match="gates has dtype int32"):
        ascan.scan(_fake_cuda(2, 3, 4, dtype=torch.int32), _fake_cuda(2, 3, 4, dtype=torch.int32))
    with pytest.raises(TypeError, match="gates has dtype complex64"):
        ascan.scan(_fake_cuda(2, 3, 4, dtype=torch.complex64),
                   _fake_cuda(2, 3, 4, dtype=torch.complex64))


def test_error_dtype_not_built(fake, monkeypatch):
    from ascan import _ext

    monkeypatch.setattr(_ext, "compiled_dtypes", lambda: ["float32"])
    with pytest.raises(TypeError, match="bfloat16, which this build of ascan._C has no kernels for.*ASCAN_DTYPES"):
        ascan.scan(_fake_cuda(2, 3, 4, dtype=torch.bfloat16),
                   _fake_cuda(2, 3, 4, dtype=torch.bfloat16))


def test_error_shape_mismatch(fake):
    with pytest.raises(ValueError, match=r"tokens has shape \(2, 3, 5\) but gates has \(2, 3, 4\)"):
        ascan.scan(_fake_cuda(2, 3, 4), _fake_cuda(2, 3, 5))


def test_error_rank(fake):
    with pytest.raises(ValueError, match=r"gates must be 3-D \(B, C, T\)"):
        ascan.scan(_fake_cuda(3, 4), _fake_cuda(3, 4))
    with pytest.raises(ValueError, match=r"gates must be 3-D \(B, T, C\)"):
        ascan.scan(_fake_cuda(1, 2, 3, 4), _fake_cuda(1, 2, 3, 4), layout="btc")


def test_error_layout_and_flags(fake):
    g = _fake_cuda(2, 3, 4)
    with pytest.raises(ValueError, match="layout must be 'bct' or 'btc'"):
        ascan.scan(g, g, layout="tbc")
    with pytest.raises(TypeError, match="reverse must be a bool"):
        ascan.scan(g, g, reverse=1)
    with pytest.raises(TypeError, match="return_final_state must be a bool"):
        ascan.scan(g, g, return_final_state="yes")


def test_error_initial_state(fake):
    g = _fake_cuda(2, 3, 4)
    with pytest.raises(ValueError, match=r"initial_state must be \(B, C\) = \(2, 3\), got \(3, 2\)"):
        ascan.scan(g, g, initial_state=_fake_cuda(3, 2))
    with pytest.raises(TypeError, match="initial_state has dtype float64 but gates has float32"):
        ascan.scan(g, g, initial_state=_fake_cuda(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="initial_state is on cpu"):
        ascan.scan(g, g, initial_state=torch.empty(2, 3))
    with pytest.raises(TypeError, match="initial_state must be a torch.Tensor"):
        ascan.scan(g, g, initial_state=0.0)


def test_error_cu_seqlens(fake):
    g = _fake_cuda(1, 3, 10)
    cu = _fake_cuda(3, dtype=torch.int32)
    with pytest.raises(TypeError, match="cu_seqlens has dtype float32"):
        ascan.scan(g, g, cu_seqlens=_fake_cuda(3))
    with pytest.raises(ValueError, match="cu_seqlens is on cpu"):
        ascan.scan(g, g, cu_seqlens=torch.zeros(3, dtype=torch.int32))
    with pytest.raises(ValueError, match="cu_seqlens must be 1-D"):
        ascan.scan(g, g, cu_seqlens=_fake_cuda(1, 3, dtype=torch.int32))
    with pytest.raises(ValueError, match="cu_seqlens must be 1-D with N"):
        ascan.scan(g, g, cu_seqlens=_fake_cuda(1, dtype=torch.int32))
    with pytest.raises(ValueError, match="cu_seqlens must be contiguous"):
        ascan.scan(g, g, cu_seqlens=_fake_cuda(6, dtype=torch.int32)[::2])
    with pytest.raises(TypeError, match="cu_seqlens must be a torch.Tensor"):
        ascan.scan(g, g, cu_seqlens=[0, 4, 10])
    b2 = _fake_cuda(2, 3, 10)
    with pytest.raises(ValueError, match=r"with cu_seqlens .* gates must be \(1, C, total\)"):
        ascan.scan(b2, b2, cu_seqlens=cu)
    with pytest.raises(ValueError, match=r"initial_state must be \(N, C\) .* = \(2, 3\)"):
        ascan.scan(g, g, cu_seqlens=cu, initial_state=_fake_cuda(1, 3))


def test_errors_launch_nothing(monkeypatch):
    # The checks come first: a bad call never reaches the op (nor ascan._C).
    from ascan import _ext

    def boom():
        raise AssertionError("the op ran")

    monkeypatch.setattr(_ext, "load", boom)
    with FakeTensorMode():
        with pytest.raises(ValueError):
            ascan.scan(_fake_cuda(2, 3, 4), _fake_cuda(2, 3, 5))
    with pytest.raises(ValueError):
        ascan.scan(torch.rand(2, 3, 4), torch.rand(2, 3, 4))


# ---- with the CPU stand-in kernels: autograd wiring, opcheck, gradcheck, compile -----------


def _inputs(B, C, T, dtype=torch.float64, layout="bct", seed=0):
    gen = torch.Generator().manual_seed(seed)
    shape = (B, C, T) if layout == "bct" else (B, T, C)
    g = torch.rand(shape, generator=gen, dtype=dtype) * 0.5 + 0.45
    x = torch.randn(shape, generator=gen, dtype=dtype)
    h0 = torch.randn(B, C, generator=gen, dtype=dtype)
    return g, x, h0


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("layout", ["bct", "btc"])
def test_opcheck(cpu_ops, reverse, layout):
    g, x, h0 = _inputs(2, 3, 6, layout=layout)
    g.requires_grad_()
    x.requires_grad_()
    h0.requires_grad_()
    torch.library.opcheck(torch.ops.ascan.scan_fwd.default, (g, x, h0, None, reverse,
                                                               layout == "btc"))
    torch.library.opcheck(torch.ops.ascan.scan_fwd.default, (g, x, None, None, reverse,
                                                               layout == "btc"))
    s = g.detach()
    torch.library.opcheck(torch.ops.ascan.scan_bwd.default,
                          (s, s, s, h0.detach(), h0.detach(), None, reverse, layout == "btc",
                           True))


def test_opcheck_packed(cpu_ops):
    g, x, _ = _inputs(1, 3, 12)
    cu = torch.tensor([0, 5, 5, 12], dtype=torch.int64)
    h0 = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(torch.ops.ascan.scan_fwd.default,
                          (g.requires_grad_(), x, h0, cu, False, False))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("layout", ["bct", "btc"])
@pytest.mark.parametrize("with_h0", [False, True])
def test_gradcheck(cpu_ops, reverse, layout, with_h0):
    g, x, h0 = _inputs(2, 3, 5, layout=layout)
    args = [g.requires_grad_(), x.requires_grad_()]
    if with_h0:
        args.append(h0.requires_grad_())

    def f(g, x, h0=None):
        out, h = ascan.scan(g, x, initial_state=h0, reverse=reverse, return_final_state=True,
                            layout=layout)
        return out, h

    assert torch.autograd.gradcheck(f, args)


def test_gradcheck_packed_and_final_only(cpu_ops):
    g, x, _ = _inputs(1, 2, 9)
    cu = torch.tensor([0, 4, 4, 9], dtype=torch.int32)
    h0 = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    g.requires_grad_()
    x.requires_grad_()

    def f(g, x, h0):
        return ascan.scan(g, x, initial_state=h0, cu_seqlens=cu, return_final_state=True)

    assert torch.autograd.gradcheck(f, (g, x, h0))

    def final_only(g, x, h0):  # the sequence output unused: its gradient arrives as None
        return ascan.scan(g, x, initial_state=h0, cu_seqlens=cu, return_final_state=True)[1]

    assert torch.autograd.gradcheck(final_only, (g, x, h0))


def test_backward_matches_autograd_of_loop(cpu_ops):
    g, x, h0 = _inputs(2, 4, 11, dtype=torch.float64)
    for reverse in (False, True):
        leaves = [t.clone().requires_grad_() for t in (g, x, h0)]
        out, h = ascan.scan(*leaves[:2], initial_state=leaves[2], reverse=reverse,
                            return_final_state=True)
        (out.square().sum() + (h * 3).sum()).backward()
        ref = [t.clone().requires_grad_() for t in (g, x, h0)]
        out, h = scan_loop(*ref[:2], initial_state=ref[2], reverse=reverse,
                           return_final_state=True)
        (out.square().sum() + (h * 3).sum()).backward()
        for a, b in zip(leaves, ref):
            torch.testing.assert_close(a.grad, b.grad)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("layout", ["bct", "btc"])
def test_eager_path_equals_op_path(cpu_ops, monkeypatch, reverse, layout):
    # ascan.scan calls the kernels through a plain autograd.Function outside tracing; the
    # custom ops' route must give the same values and gradients, and the eager route must be
    # the one taken (the kernels called directly, the ops not at all).
    from ascan import _ops

    g, x, h0 = _inputs(2, 3, 7, layout=layout)
    gout = torch.randn_like(x)
    gh = torch.randn_like(h0)

    def run():
        leaves = [t.clone().requires_grad_() for t in (g, x, h0)]
        out, h = ascan.scan(*leaves[:2], initial_state=leaves[2], reverse=reverse,
                            return_final_state=True, layout=layout)
        torch.autograd.backward((out, h), (gout, gh))
        return [out.detach(), h.detach()] + [t.grad for t in leaves]

    calls = {"fwd": 0, "bwd": 0}
    fwd, bwd = _ops._EAGER_KERNELS["cpu"]

    def counted(kind, fn):
        def wrapper(*args):
            calls[kind] += 1
            return fn(*args)
        return wrapper

    monkeypatch.setitem(_ops._EAGER_KERNELS, "cpu", (counted("fwd", fwd), counted("bwd", bwd)))
    eager = run()
    assert calls == {"fwd": 1, "bwd": 1}
    with torch.no_grad():  # no autograd: the forward kernel alone
        ascan.scan(g, x, layout=layout)
    assert calls == {"fwd": 2, "bwd": 1}
    monkeypatch.setattr(_ops, "_eager", lambda *args: False)
    through_ops = run()
    assert calls == {"fwd": 2, "bwd": 1}
    for a, b in zip(eager, through_ops):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_eager_path_only_outside_tracing(cpu_ops):
    from ascan import _ops

    g, x, _ = _inputs(1, 2, 3)
    assert _ops._eager(g, x, None, None)
    assert _ops._eager(torch.nn.Parameter(g), x, None, None)
    with FakeTensorMode():
        assert not _ops._eager(g, x, None, None)
    assert not _ops._eager(g.to("meta"), x.to("meta"), None, None)  # no kernels for meta
    seen = []
    torch.func.vmap(lambda a: seen.append(_ops._eager(a, a, None, None)) or a)(g)
    assert seen == [False]


def test_eager_path_once_differentiable(cpu_ops):
    g, x, _ = _inputs(1, 2, 4)
    g.requires_grad_()
    out = ascan.scan(g, x)
    (grad,) = torch.autograd.grad(out.sum(), g, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
        grad.sum().backward()


def test_compile_fullgraph_hgrn(cpu_ops):
    torch.manual_seed(0)
    layer = HGRNLayer(8).double()
    x = torch.randn(2, 16, 8, dtype=torch.float64)
    h0 = torch.randn(2, 8, dtype=torch.float64)
    graphs, compiled_graphs = [], []

    def backend(gm, example_inputs):
        graphs.append(gm)
        from functorch.compile import make_boxed_func

        def keep(g, _):
            compiled_graphs.append(g)
            return make_boxed_func(g.forward)

        return torch._dynamo.backends.common.aot_autograd(fw_compiler=keep, bw_compiler=keep)(
            gm, example_inputs)

    torch._dynamo.reset()
    compiled = torch.compile(layer, fullgraph=True, backend=backend)
    y, last = compiled(x, h0)
    y_ref, last_ref = layer(x, h0)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(last, last_ref)
    (y.sum() + last.sum()).backward()
    grads = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    (y_ref.sum() + last_ref.sum()).backward()
    for a, p in zip(grads, layer.parameters()):
        torch.testing.assert_close(a, p.grad)
    assert len(graphs) == 1  # one graph, no break
    # the forward graph calls the forward op, the backward graph the fused backward op
    fw, bw = compiled_graphs

    def calls(gm):
        return {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}

    assert "ascan.scan_fwd.default" in calls(fw)
    assert "ascan.scan_bwd.default" in calls(bw)


def test_compile_explain_no_break(cpu_ops):
    def f(g, x):
        return ascan.scan(g, x, reverse=True).sum()

    g, x, _ = _inputs(2, 3, 5)
    explanation = torch._dynamo.explain(f)(g, x)
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1


def test_compile_dynamic_shapes(cpu_ops):
    # torch.compile(dynamic=True): the fake implementations run on symbolic sizes
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    def f(g, x, h0):
        return ascan.scan(g, x, initial_state=h0, return_final_state=True, layout="btc")

    torch._dynamo.reset()
    compiled = torch.compile(f, backend=backend, fullgraph=True, dynamic=True)
    for T in (5, 9):
        g, x, h0 = _inputs(2, 3, T, layout="btc")
        out, h = compiled(g, x, h0)
        ref, href = scan_loop(g, x, initial_state=h0, return_final_state=True, layout="btc")
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(h, href)
    assert len(seen) == 1  # one graph for both lengths
    placeholders = [n for n in seen[0].graph.nodes if n.op == "placeholder"]
    assert any(isinstance(n.meta.get("example_value"), torch.SymInt) for n in placeholders)


def test_shim_matches_reference(cpu_ops):
    from ascan.accelerated_scan import scan

    g, x, _ = _inputs(2, 3, 16)
    torch.testing.assert_close(scan(g, x), scan_loop(g, x))


def test_reference_packed_equals_separate():
    g, x, h0 = _inputs(1, 2, 10)
    cu = torch.tensor([0, 3, 10])
    h0 = torch.randn(2, 2, dtype=torch.float64)
    out, h = scan_loop(g, x, initial_state=h0, cu_seqlens=cu, return_final_state=True)
    a, ha = scan_loop(g[:, :, :3], x[:, :, :3], initial_state=h0[:1], return_final_state=True)
    b, hb = scan_loop(g[:, :, 3:], x[:, :, 3:], initial_state=h0[1:], return_final_state=True)
    torch.testing.assert_close(out, torch.cat([a, b], 2))
    torch.testing.assert_close(h, torch.cat([ha, hb], 0))


def test_extension_checks_its_arguments():
    # ascan._C, when built, checks again below the Python layer (no GPU needed to reach them)
    from ascan import _ext

    if _ext._module is None:
        pytest.skip("ascan._C is not built")
    ext = _ext.load()
    g = torch.rand(2, 3, 4)
    with pytest.raises(ValueError, match="must be CUDA tensors"):
        ext.forward(g, g, g, torch.empty(2, 3), None, None, False, False)
    with pytest.raises(ValueError, match="must be CUDA tensors"):
        ext.backward(g, g, g, g, g, None, None, None, None, False, False)
