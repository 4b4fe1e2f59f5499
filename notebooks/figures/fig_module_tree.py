"""Figure 2 (lesson 3): a module tree coloured by what `model.to(d)` does to each tensor it holds.

Registered parameters and buffers move (and are saved); a buffer registered with `persistent=False`
moves but is not saved; a plain tensor attribute and anything in a Python list stay behind.
"""
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

MOVES, NOT_SAVED, STAYS = "#b2f2bb", "#a5d8ff", "#ffc9c9"
EDGE = "#343a40"

# (depth, code, what it is, colour); depth 0 is the module itself
TREE = [
    (0, "model = Holder()", "nn.Module", None),
    (1, "self.weight = nn.Parameter(...)", "parameter / 参数", MOVES),
    (1, 'register_buffer("saved", ...)', "buffer / 缓冲区", MOVES),
    (1, 'register_buffer("constant", ..., persistent=False)', "non-persistent buffer / 非持久缓冲区", NOT_SAVED),
    (1, "self.plain = torch.ones(3)", "plain attribute / 普通属性", STAYS),
    (1, "self.in_list = [torch.ones(3)]", "tensor in a Python list / Python 列表里的张量", STAYS),
    (1, "self.layers = nn.ModuleList([nn.Linear(3, 3)])", "submodule / 子模块", None),
    (2, "layers[0].weight, layers[0].bias", "parameters / 参数", MOVES),
    (1, "self.heads = [nn.Linear(3, 3)]", "module in a Python list / Python 列表里的模块", STAYS),
]
KEY = [
    (MOVES, "moves with model.to(d), saved in state_dict()  ·  随 model.to(d) 移动，保存在 state_dict() 中"),
    (NOT_SAVED, "moves, but not saved (persistent=False)  ·  会移动，但不保存（persistent=False）"),
    (STAYS, "stays behind: model.to(d) never sees it  ·  留在原处：model.to(d) 看不到它"),
]


def draw():
    rows = len(TREE)
    fig, ax = plt.subplots(figsize=(9.6, 0.5 * (rows + 3.4)))
    ax.set(xlim=(0, 12), ylim=(-3.4, rows))
    ax.axis("off")
    for row, (depth, code, kind, colour) in enumerate(TREE):
        y = rows - 1 - row
        x = 0.2 + 0.55 * depth
        if depth:  # the branch from the previous sibling (or the parent), drawn under the boxes
            above = max(r for r in range(row) if TREE[r][0] <= depth)
            top = rows - 1 - above + 0.2
            ax.plot([x - 0.3, x - 0.3, x], [top, y + 0.2, y + 0.2], color="#868e96", linewidth=1.2, zorder=0.5)
        ax.add_patch(FancyBboxPatch((x, y), 11.6 - x, 0.4, boxstyle="round,pad=0.03,rounding_size=0.08",
                                    facecolor=colour or "white", edgecolor=EDGE, linewidth=1.1))
        ax.text(x + 0.15, y + 0.2, code, va="center", fontsize=9.5, family="monospace",
                weight="bold" if depth == 0 else "normal")
        ax.text(11.45, y + 0.2, kind, va="center", ha="right", fontsize=9.5)
    for i, (colour, label) in enumerate(KEY):
        y = -0.75 - 0.6 * i
        ax.add_patch(FancyBboxPatch((0.2, y - 0.17), 0.45, 0.34, boxstyle="square,pad=0", facecolor=colour,
                                    edgecolor=EDGE))
        ax.text(0.85, y, label, va="center", fontsize=9.5)
    ax.text(6, -2.9, "model.to(d) moves registered parameters and buffers, in every submodule\n"
            "model.to(d) 移动每个子模块中已注册的参数和缓冲区", ha="center", va="center", fontsize=9.5,
            style="italic", color="#495057")
    return fig
