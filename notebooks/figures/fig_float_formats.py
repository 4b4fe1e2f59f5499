"""Figure 5a (lesson 9): the bit layouts of float32, float16 and bfloat16, next to the three problems of
pure 16-bit training that they cause."""
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch, Rectangle

SIGN, EXPONENT, MANTISSA = "#f4cccc", "#cfe2f3", "#d9ead3"
FORMATS = [  # name, exponent bits, mantissa bits, facts
    ("float32", 8, 23, "max 3.4e38 · eps 1.2e-7 (≈7 decimal digits · 约 7 位十进制有效数字)"),
    ("float16", 5, 10, "max 65504 · smallest 6e-8 · eps 9.8e-4 (≈3 decimal digits · 约 3 位十进制有效数字)"),
    ("bfloat16", 8, 7, "max 3.4e38 · eps 7.8e-3 (≈2–3 decimal digits · 约 2–3 位十进制有效数字)"),
]
PROBLEMS = [
    ("① small updates vanish\n① 小的更新消失",
     "float16: 1.0 + 1e-4 == 1.0\nweight − lr·grad does not move\n权重更新被舍入掉", "mantissa · 尾数"),
    ("② overflow and underflow\n② 上溢和下溢",
     "float16: 300² = inf\n1e-8 → 0: small gradients lost\n小的梯度丢失", "exponent · 指数"),
    ("③ BatchNorm statistics\n③ BatchNorm 统计量",
     "running_var > 65504 → inf\neval mode outputs only zeros\n评估模式只输出零", "exponent · 指数"),
]


def layouts(ax):
    ax.set_title("Bit layouts · 位布局", fontsize=11, weight="bold", loc="left")
    width = 0.28  # one bit
    for row, (name, exponent, mantissa, facts) in enumerate(FORMATS):
        y = 2.2 * (len(FORMATS) - 1 - row) + 0.6
        ax.text(-0.5, y + 0.3, name, ha="right", va="center", fontsize=10, weight="bold")
        x = 0.0
        for bits, color, label in ((1, SIGN, "sign\n符号"), (exponent, EXPONENT, f"exponent\n指数 {exponent}"),
                                   (mantissa, MANTISSA, f"mantissa\n尾数 {mantissa}")):
            for i in range(bits):
                ax.add_patch(Rectangle((x + i * width, y), width, 0.6, facecolor=color, edgecolor="#777777",
                                       linewidth=0.5))
            ax.text(x + bits * width / 2, y + 0.68, label, ha="center", va="bottom", fontsize=7.5,
                    linespacing=1.0)
            x += bits * width
        ax.text(0, y - 0.3, facts, fontsize=8.5, va="center", color="#333333")
    ax.set_xlim(-1.6, 32 * width + 0.2)
    ax.set_ylim(-0.1, 2.2 * len(FORMATS) + 0.3)


def problems(ax):
    ax.set_title("Pure 16-bit training: three problems · 纯 16 位训练的三个问题", fontsize=11, weight="bold",
                 loc="left")
    for column, (title, body, cause) in enumerate(PROBLEMS):
        x = column * 3.4
        ax.add_patch(FancyBboxPatch((x, 0), 3.2, 2.6, boxstyle="round,pad=0.02,rounding_size=0.08",
                                    facecolor="#fff4d6", edgecolor="#555555", linewidth=1))
        ax.text(x + 1.6, 2.25, title, ha="center", va="center", fontsize=9, weight="bold")
        ax.text(x + 1.6, 1.15, body, ha="center", va="center", fontsize=8.5)
        ax.text(x + 1.6, 0.25, f"cause · 原因: {cause}", ha="center", va="center", fontsize=8, color="#8a5a00")
    ax.set_xlim(-0.1, 10.2)
    ax.set_ylim(-0.2, 2.8)


def draw():
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.4), height_ratios=(1.5, 1))
    layouts(top)
    problems(bottom)
    for ax in (top, bottom):
        ax.axis("off")
    fig.tight_layout()
    return fig
