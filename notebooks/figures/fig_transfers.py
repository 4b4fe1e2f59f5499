"""Figure 3 (lesson 7): the path of a host→device copy (pageable → pinned → device), and what the CPU
thread and the GPU stream do for a blocking copy, a non-blocking copy, and the early-read race."""
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

HOST = "#fff4d6"      # host memory
PINNED = "#ffe0b2"    # page-locked host memory
GPU = "#dbe9f6"       # device memory, GPU work
CPU_WORK = "#e8f5e9"  # useful CPU work
WAIT = "#eeeeee"      # the CPU waiting
BAD = "#c0392b"
GOOD = "#2e7d32"


def box(ax, x, y, w, h, text, color, size=9, weight="normal"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, edgecolor="#555555", linewidth=1))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, weight=weight)


def arrow(ax, start, end, text=None, color="#333333", offset=0.8):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=color, linewidth=1.4))
    if text:
        ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + offset, text, ha="center", va="bottom",
                fontsize=8.5, color=color)


def memory_path(ax):
    ax.set_title("Where a host→device copy goes · 主机→设备复制的路径", fontsize=11, weight="bold", loc="left")
    box(ax, 0.1, 1.0, 2.6, 1.4, "pageable host memory\n可分页主机内存\n(ordinary tensors · 普通张量)", HOST)
    box(ax, 4.2, 1.0, 2.6, 1.4, "pinned host memory\n锁页主机内存", PINNED, weight="bold")
    box(ax, 8.3, 1.0, 2.6, 1.4, "device memory\n设备内存", GPU, weight="bold")
    arrow(ax, (2.75, 1.7), (4.15, 1.7), "① staging copy, by the CPU\n① 暂存复制，由 CPU 完成")
    arrow(ax, (6.85, 1.7), (8.25, 1.7), "② DMA over PCIe / NVLink\n② 经 PCIe / NVLink 的 DMA")
    ax.text(5.5, 0.75, "x.pin_memory() is ① itself, a blocking CPU copy · x.pin_memory() 就是 ①，一次阻塞的 CPU 复制\n"
            "DataLoader(pin_memory=True, num_workers > 0) does it in its pin thread, off the training loop\n"
            "DataLoader(pin_memory=True, num_workers > 0) 在它的锁页线程中完成 ①，不占用训练循环", ha="center", va="top", fontsize=8.5)
    ax.set_xlim(-1.6, 11.5)
    ax.set_ylim(-0.3, 3.4)


def bar(ax, y, start, length, text, color, text_color="black"):
    ax.add_patch(Rectangle((start, y - 0.32), length, 0.64, facecolor=color, edgecolor="#555555", linewidth=0.8))
    ax.text(start + length / 2, y, text, ha="center", va="center", fontsize=8, color=text_color)


def timeline(ax, y, title, cpu, gpu, notes=()):
    """One scenario: a CPU-thread lane at y + 0.45 and a GPU-stream lane at y - 0.45; notes to the right."""
    ax.text(0, y + 1.15, title, fontsize=9.5, weight="bold", va="center")
    for lane, label in ((y + 0.45, "CPU thread\nCPU 线程"), (y - 0.45, "GPU stream\nGPU 流")):
        ax.text(-0.15, lane, label, ha="right", va="center", fontsize=8)
        ax.plot([0, 7.2], [lane, lane], color="#cccccc", linewidth=0.8, zorder=0)
    for start, length, text, color in cpu:
        bar(ax, y + 0.45, start, length, text, color)
    for start, length, text, color in gpu:
        bar(ax, y - 0.45, start, length, text, color)
    for lane, text, color in notes:
        ax.text(7.4, y + (0.45 if lane == "cpu" else -0.45), text, va="center", fontsize=8.5, color=color)


def timelines(ax):
    ax.set_title("What the CPU and the GPU do (time →) · CPU 和 GPU 在做什么（时间 →）", fontsize=11,
                 weight="bold", loc="left")
    timeline(ax, 7.0, "x.to(device): blocking · 阻塞",
             cpu=[(0, 0.5, "call\n调用", CPU_WORK), (0.5, 3.5, "waits for the copy · 等待复制", WAIT),
                  (4.0, 3.0, "next Python line · 下一行", CPU_WORK)],
             gpu=[(0.5, 3.5, "copy H→D · 复制", GPU), (4.2, 2.2, "model(x) kernels", GPU)],
             notes=[("cpu", "the CPU waits (from pageable memory it\ndoes the staging copy ① itself)\nCPU 等待（源在可分页内存时，\n它亲自做暂存复制 ①）", BAD)])
    timeline(ax, 3.9, "x.to(device, non_blocking=True), x pinned · x 在锁页内存中",
             cpu=[(0, 0.5, "call\n调用", CPU_WORK), (0.5, 5.2, "goes on at once: next batch… · 立即继续：下一个批次…",
                                                    CPU_WORK)],
             gpu=[(0.5, 3.5, "copy H→D · 复制", GPU), (4.0, 2.2, "model(x) kernels", GPU)],
             notes=[("cpu", "the CPU works during the copy\nCPU 在复制期间继续工作", GOOD),
                    ("gpu", "same stream: the kernels\nwait for the copy\n同一个流：内核等待复制完成", GOOD)])
    timeline(ax, 0.8, "y.to(\"cpu\", non_blocking=True): the early-read race · 过早读取的竞争",
             cpu=[(0, 0.5, "call\n调用", CPU_WORK), (0.5, 1.5, "read y ✗", "#f5d5d0"),
                  (4.0, 1.3, "synchronize()", WAIT), (5.4, 1.5, "read y ✓", CPU_WORK)],
             gpu=[(0.0, 2.4, "kernels computing y", GPU), (2.4, 1.6, "copy D→H", GPU)],
             notes=[("cpu", "✗ read before the copy: stale values, no error\n✗ 复制完成前读取：旧数据，没有报错", BAD),
                    ("gpu", "✓ synchronize() waits for the copy\n✓ synchronize() 等待复制完成", GOOD)])
    ax.set_xlim(-1.6, 11.5)
    ax.set_ylim(-0.2, 8.6)


def draw():
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8), height_ratios=(1, 2.6))
    memory_path(top)
    timelines(bottom)
    for ax in (top, bottom):
        ax.axis("off")
    fig.tight_layout()
    return fig
