"""Figure 5b (lesson 9): one mixed-precision training step: float32 master weights, a 16-bit copy per
operation inside autocast, a float32 loss, scaled gradients that are unscaled before the update."""
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

F32 = "#dbe9f6"     # float32
F16 = "#fde2c8"     # 16-bit
SCALER = "#e8f5e9"  # the gradient scaler


def box(ax, x, y, w, h, text, color, weight="normal", style="solid"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", facecolor=color,
                                edgecolor="#555555", linewidth=1, linestyle=style))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=8.5, weight=weight)


def arrow(ax, start, end, text=None, rad=0.0, where=(0, 0.15)):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="#333333",
                                 linewidth=1.3, connectionstyle=f"arc3,rad={rad}"))
    if text:
        ax.text((start[0] + end[0]) / 2 + where[0], (start[1] + end[1]) / 2 + where[1], text, ha="center",
                va="bottom", fontsize=8)


def draw():
    fig, ax = plt.subplots(figsize=(10, 5.2))
    # the autocast region
    ax.add_patch(FancyBboxPatch((2.7, 3.2), 6.1, 2.5, boxstyle="round,pad=0.02,rounding_size=0.1",
                                facecolor="none", edgecolor="#8a5a00", linewidth=1.2, linestyle="--"))
    ax.text(2.85, 5.5, "with torch.autocast(device_type, dtype):", fontsize=8.5, color="#8a5a00", va="center",
            family="monospace")
    box(ax, 0.0, 3.6, 2.2, 1.5, "master weights\n主权重\nfloat32\n(never cast · 从不转换)", F32, weight="bold")
    box(ax, 3.0, 3.5, 2.4, 1.6, "Linear, matmul, conv\n16-bit copies of inputs\nand weights, per op\n"
        "每个运算制作输入和\n权重的 16 位副本", F16)
    box(ax, 6.1, 3.5, 2.4, 1.6, "loss ops run in float32\n损失等运算以 float32 运行\n(CUDA also: softmax,\nsum, … · 还有 …)", F32)
    box(ax, 9.2, 3.6, 2.0, 1.5, "scaler.scale(loss)\nloss × S\n损失 × S", SCALER)
    arrow(ax, (2.25, 4.35), (2.95, 4.35))
    arrow(ax, (5.45, 4.3), (6.05, 4.3), "16-bit\n16 位", where=(0, 0.15))
    arrow(ax, (8.55, 4.35), (9.15, 4.35))
    # backward and update, right to left
    box(ax, 8.95, 0.3, 2.4, 1.9, "backward(), all × S\n16-bit ops: 16-bit grads,\nsmall ones → 0 without S\n"
        "weights' grads float32\n16 位运算的梯度为 16 位，\n不乘 S 时小梯度变成 0\n权重的梯度为 float32", F32)
    box(ax, 5.9, 0.4, 2.6, 1.7, "scaler.unscale_(opt)  ÷ S\nthen clip · 然后裁剪\nclip_grad_norm_", SCALER)
    box(ax, 2.6, 0.4, 2.6, 1.7, "scaler.step(opt)\nskipped if inf / nan\n有 inf / nan 则跳过\nscaler.update()", SCALER)
    arrow(ax, (10.2, 3.55), (10.2, 2.25))
    arrow(ax, (8.9, 1.25), (8.55, 1.25))
    arrow(ax, (5.85, 1.25), (5.25, 1.25))
    arrow(ax, (2.55, 1.25), (1.1, 3.55), "update float32 weights\n更新 float32 权重", rad=-0.25, where=(-0.9, -0.3))
    ax.text(5.6, -0.15, "S: the scale, 65536 at first; halved after an inf / nan, doubled after 2000 steps without one\n"
            "S：缩放因子，开始为 65536；出现 inf / nan 后减半，连续 2000 步没有则加倍\n"
            "bfloat16 usually needs no scaler · bfloat16 通常不需要缩放器",
            ha="center", va="top", fontsize=8.5)
    ax.set_xlim(-0.2, 11.5)
    ax.set_ylim(-1.3, 5.9)
    ax.axis("off")
    fig.tight_layout()
    return fig
