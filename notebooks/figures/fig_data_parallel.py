"""Figure 4 (lesson 11): DataParallel (one process: scatter, replicate, gather, every step, through GPU 0)
next to DistributedDataParallel (one process per GPU, only the gradients are all-reduced)."""
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

GPU = "#dbe9f6"        # a GPU and what it holds
PROCESS = "#fff4d6"    # a Python process
HOT = "#c0392b"        # traffic every step
CALM = "#2e7d32"       # the only traffic of DDP


def box(ax, x, y, w, h, text, color, size=9, weight="normal", edge="#555555"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, edgecolor=edge, linewidth=1))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, weight=weight)


def arrow(ax, start, end, color, text=None, where=0.5, offset=(0, 0), both=False, rad=0.0):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="<|-|>" if both else "-|>", mutation_scale=11,
                                 color=color, linewidth=1.4, connectionstyle=f"arc3,rad={rad}"))
    if text:
        x = start[0] + (end[0] - start[0]) * where + offset[0]
        y = start[1] + (end[1] - start[1]) * where + offset[1]
        ax.text(x, y, text, ha="center", va="center", fontsize=8.5, color=color,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})


def data_parallel(ax):
    ax.set_title("nn.DataParallel\none process · 一个进程", fontsize=11, weight="bold")
    box(ax, 0.2, 0.3, 9.6, 7.4, "", PROCESS)
    ax.text(0.45, 7.3, "1 Python process, 1 thread per GPU (one GIL)\n1 个 Python 进程，每块 GPU 1 个线程（共用 GIL）",
            fontsize=8.5, va="top")
    box(ax, 3.3, 4.1, 3.4, 1.9, "GPU 0\nmodel + replica 0\n模型 + 副本 0\nbatch · 批次", GPU, weight="bold")
    for i, x in enumerate((0.7, 7.3)):
        box(ax, x, 1.5, 2.0, 1.5, f"GPU {i + 1}\nreplica · 副本", GPU)
    # every step: replicate the model, scatter the batch, gather the outputs, all through GPU 0
    arrow(ax, (3.4, 4.2), (1.9, 3.05), HOT, "① replicate, scatter\n复制模型，拆分批次", where=0.45, offset=(-0.9, 0.1))
    arrow(ax, (6.6, 4.2), (8.1, 3.05), HOT, "① replicate, scatter\n复制模型，拆分批次", where=0.45, offset=(0.9, 0.1))
    arrow(ax, (2.0, 1.5), (4.2, 4.05), HOT, rad=0.35)
    arrow(ax, (8.0, 1.5), (5.8, 4.05), HOT, rad=-0.35)
    ax.text(5.0, 2.25, "② gather outputs\n收集输出到 GPU 0", ha="center", va="center", fontsize=8.5, color=HOT)
    ax.text(5.0, 0.75, "every step · 每一步都要做\ngradients summed on GPU 0 · 梯度累加到 GPU 0",
            ha="center", va="center", fontsize=8.5, color=HOT)


def distributed(ax):
    ax.set_title("nn.parallel.DistributedDataParallel\none process per GPU · 每块 GPU 一个进程",
                 fontsize=11, weight="bold")
    for rank, x in enumerate((0.2, 3.5, 6.8)):
        box(ax, x, 2.6, 3.0, 5.1, "", PROCESS)
        ax.text(x + 1.5, 7.3, f"process · 进程\nrank {rank}", ha="center", va="top", fontsize=8.5)
        box(ax, x + 0.3, 3.0, 2.4, 2.9, f"GPU {rank}\nmodel · 模型\n1/3 batch\n1/3 批次", GPU, weight="bold")
    box(ax, 0.2, 0.3, 9.6, 1.2, "", "#e8f5e9", edge=CALM)
    ax.text(5.0, 0.9, "all-reduce: average the gradients · 梯度求平均", ha="center", va="center",
            fontsize=9, color=CALM, weight="bold")
    for x in (1.7, 5.0, 8.3):
        arrow(ax, (x, 2.95), (x, 1.55), CALM, both=True)
    ax.text(5.0, 2.15, "gradients only, during backward() · 只有梯度，在 backward() 中",
            ha="center", fontsize=8.5, color=CALM, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})


def draw():
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.6))
    for ax in (left, right):
        ax.set_xlim(0, 10)
        ax.set_ylim(0, 8)
        ax.set_aspect("equal")
        ax.axis("off")
    data_parallel(left)
    distributed(right)
    figure.tight_layout(w_pad=2)
    return figure
