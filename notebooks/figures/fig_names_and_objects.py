"""Figure 1 (lessons 2–3): names and objects.

`y = x.to(d)` gives a new tensor while `x` still names the old one; `model.to(d)` keeps the module object
and its parameter objects and converts their data in place.
"""
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

CPU, DEV, NEW = "#cfe3f7", "#ffd8a8", "#fff3bf"  # data on the CPU, data on device d, a new object's frame
EDGE, NAME = "#343a40", "#e9ecef"


def box(ax, x, y, w, h, text, face, *, edge=EDGE, size=9.5, style="round,pad=0.02,rounding_size=0.08",
        weight="normal", dashed=False):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style, facecolor=face, edgecolor=edge,
                                linewidth=1.3, linestyle="--" if dashed else "-"))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, weight=weight)


def name(ax, x, y, text, w=0.9):
    """A Python name: a tag that points at an object."""
    box(ax, x, y, w, 0.42, text, NAME, size=10.5, weight="bold", style="round,pad=0.02,rounding_size=0.18")


def arrow(ax, start, end):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=13, linewidth=1.4, color=EDGE))


def draw():
    fig, ax = plt.subplots(figsize=(9.6, 5.6))
    ax.set(xlim=(0, 12), ylim=(0, 7.2))
    ax.axis("off")
    ax.plot([6, 6], [0.2, 6.6], color="#adb5bd", linewidth=1)

    # titles
    ax.text(3, 6.95, "Tensor.to: out-of-place / 非原地", ha="center", fontsize=12.5, weight="bold")
    ax.text(9, 6.95, "Module.to: in place / 原地", ha="center", fontsize=12.5, weight="bold")
    for y, label in [(6.35, "before / 之前"), (3.5, "after / 之后")]:
        ax.text(0.1, y, label, fontsize=10, style="italic", color="#495057")
        ax.text(6.15, y, label, fontsize=10, style="italic", color="#495057")

    # Tensor.to, before: x names tensor #1 on the CPU
    name(ax, 0.3, 5.25, "x")
    box(ax, 2.0, 5.05, 3.5, 0.8, "tensor #1\ncpu  [0., 1., 2., 3.]", CPU)
    arrow(ax, (1.22, 5.46), (1.98, 5.46))
    ax.text(3, 4.35, "y = x.to(d)", ha="center", fontsize=11, family="monospace",
            bbox=dict(boxstyle="round,pad=0.3", facecolor="white", edgecolor="#adb5bd"))

    # Tensor.to, after: x still names #1, y names the new tensor #2 on d
    name(ax, 0.3, 2.55, "x")
    box(ax, 2.0, 2.35, 3.5, 0.8, "tensor #1 (unchanged / 不变)\ncpu  [0., 1., 2., 3.]", CPU)
    arrow(ax, (1.22, 2.76), (1.98, 2.76))
    name(ax, 0.3, 1.25, "y")
    box(ax, 2.0, 1.05, 3.5, 0.8, "tensor #2 (new / 新对象)\nd  [0., 1., 2., 3.]", DEV, edge="#e8590c")
    arrow(ax, (1.22, 1.46), (1.98, 1.46))
    ax.text(3, 0.45, "without `y =`, tensor #2 is thrown away\n不写 `y =` 的话，张量 #2 直接被丢弃",
            ha="center", va="center", fontsize=9.5, color="#c92a2a")

    # Module.to, before: model names module #7 holding parameters #8, #9 on the CPU
    name(ax, 6.2, 5.25, "model", w=1.2)
    box(ax, 7.8, 4.55, 3.9, 1.75, "", "white")
    ax.text(9.75, 6.05, "module #7 (nn.Linear)", ha="center", fontsize=9.5, weight="bold")
    box(ax, 8.0, 5.2, 3.5, 0.45, "weight: Parameter #8 · cpu", CPU)
    box(ax, 8.0, 4.67, 3.5, 0.45, "bias: Parameter #9 · cpu", CPU)
    arrow(ax, (7.42, 5.46), (7.78, 5.46))
    ax.text(9.75, 4.05, "model.to(d)", ha="center", fontsize=11, family="monospace",
            bbox=dict(boxstyle="round,pad=0.3", facecolor="white", edgecolor="#adb5bd"))

    # Module.to, after: the same module #7 and parameters #8, #9, their data now on d
    name(ax, 6.2, 2.55, "model", w=1.2)
    box(ax, 7.8, 1.85, 3.9, 1.75, "", "white")
    ax.text(9.75, 3.35, "module #7 (same / 同一个对象)", ha="center", fontsize=9.5, weight="bold")
    box(ax, 8.0, 2.5, 3.5, 0.45, "weight: Parameter #8 · d", DEV, edge="#e8590c")
    box(ax, 8.0, 1.97, 3.5, 0.45, "bias: Parameter #9 · d", DEV, edge="#e8590c")
    arrow(ax, (7.42, 2.76), (7.78, 2.76))
    ax.text(6.2, 1.55, "returned\n返回值", fontsize=9.5, va="center")
    arrow(ax, (7.0, 1.55), (7.78, 2.05))
    ax.text(9.2, 0.75, "same module, same Parameter objects;\ntheir data converted in place\n"
            "同一个模块、同样的 Parameter 对象；\n它们的数据被原地转换\n"
            "(not to meta: new Parameters · 移到 meta 例外：新的 Parameter)",
            ha="center", va="center", fontsize=9.5, color="#2b8a3e")

    # colour key
    ax.add_patch(FancyBboxPatch((0.3, -0.35), 0.3, 0.22, boxstyle="square,pad=0", facecolor=CPU, edgecolor=EDGE))
    ax.text(0.7, -0.24, "data on cpu / 数据在 CPU 上", va="center", fontsize=9)
    ax.add_patch(FancyBboxPatch((4.3, -0.35), 0.3, 0.22, boxstyle="square,pad=0", facecolor=DEV, edgecolor=EDGE))
    ax.text(4.7, -0.24, "data on device d / 数据在设备 d 上", va="center", fontsize=9)
    ax.set_ylim(-0.5, 7.2)
    return fig
