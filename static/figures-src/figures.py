"""Draw the lessons' figures as SVG files in static/figures/ (run `make figures` after editing this file).

Each figure is drawn on its own panel, in a palette that follows the site's colours (static/css/site.css): light by
default, dark under `prefers-color-scheme: dark`. The panel is opaque, so a figure stays legible even where a
browser shows an SVG image without applying its media queries. Figures are about 440 units wide with 13-15 unit
text, so they stay readable at 360 px (scaled to about 75 %) and are not blown up on wide screens (the page caps
them, see `.lesson-figure` in site.css). The alt text lives in the Markdown that places the figure; the <title>
and <desc> here repeat it for anyone who opens the SVG on its own.

Usage: python static/figures-src/figures.py [--check]   (--check: exit 1 if a committed SVG is out of date)
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "figures"

# colours: light, then dark; every text/fill pair reaches WCAG AA (4.5:1), like the site's own palette
STYLE = """
.panel { fill: #f7f9fc; stroke: #c9d1db; }
.text { fill: #1b1f24; font: 15px system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", Arial, sans-serif; }
.small { font-size: 13px; }
.bold { font-weight: 700; }
.code { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 13.5px; }
.muted { fill: #4a5360; }
.host { fill: #e3ecfb; stroke: #1a4fb5; }
.gpu { fill: #e2f4e8; stroke: #1e7a43; }
.bus { fill: #fff1dc; stroke: #a35a00; }
.item { fill: #ffffff; stroke: #4a5360; }
.arrow { stroke: #1b1f24; fill: none; stroke-width: 2; }
.head { fill: #1b1f24; }
.mark { fill: #a35a00; }
.mark-text { fill: #ffffff; font-weight: 700; }
.loop { fill: none; stroke: #4a5360; stroke-dasharray: 6 4; }
.copy { fill: #cfe9d9; stroke: #1e7a43; }
.stage { fill: #ffe2b8; stroke: #a35a00; }
.wait { fill: url(#hatch); stroke: #4a5360; }
.free { fill: #dbe7fb; stroke: #1a4fb5; }
.hatch-line { stroke: #8a94a3; stroke-width: 2; }
.hatch-bg { fill: #eef1f5; }
@media (prefers-color-scheme: dark) {
  .panel { fill: #1c2027; stroke: #3a424d; }
  .text { fill: #e7eaee; }
  .muted { fill: #b3bcc7; }
  .host { fill: #152136; stroke: #8db8ff; }
  .gpu { fill: #14271c; stroke: #5cc489; }
  .bus { fill: #2b2111; stroke: #f0a640; }
  .item { fill: #14171c; stroke: #b3bcc7; }
  .arrow { stroke: #e7eaee; }
  .head { fill: #e7eaee; }
  .mark { fill: #f0a640; }
  .mark-text { fill: #14171c; }
  .loop { stroke: #b3bcc7; }
  .copy { fill: #1f3d2b; stroke: #5cc489; }
  .stage { fill: #4a3414; stroke: #f0a640; }
  .wait { stroke: #b3bcc7; }
  .free { fill: #1d2f4d; stroke: #8db8ff; }
  .hatch-line { stroke: #6b7585; }
  .hatch-bg { fill: #262c36; }
}
"""


class Drawing:
    """A tiny SVG writer: shapes and text in the classes of STYLE."""

    def __init__(self, width: int, height: int, title: str, desc: str):
        self.width, self.height, self.title, self.desc = width, height, title, desc
        self.parts: list[str] = []

    def rect(self, x, y, w, h, cls, r=8):
        self.parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{r}" class="{cls}"/>')

    def text(self, x, y, content, cls="", anchor="start"):
        self.parts.append(f'<text x="{x}" y="{y}" text-anchor="{anchor}" class="text {cls}">{escape(content)}</text>')

    def rich(self, x, y, pieces, anchor="start"):
        """One line of text made of (content, class) pieces, e.g. code next to prose."""
        spans = "".join(f'<tspan class="{cls}">{escape(content)}</tspan>' for content, cls in pieces)
        self.parts.append(f'<text x="{x}" y="{y}" text-anchor="{anchor}" class="text">{spans}</text>')

    def arrow(self, x1, y1, x2, y2):
        """A straight arrow from (x1, y1) to (x2, y2), its head drawn as a triangle."""
        import math

        angle = math.atan2(y2 - y1, x2 - x1)
        back = 10
        bx, by = x2 - back * math.cos(angle), y2 - back * math.sin(angle)
        self.parts.append(f'<line x1="{x1}" y1="{y1}" x2="{bx:.1f}" y2="{by:.1f}" class="arrow"/>')
        left = (bx + 5 * math.sin(angle), by - 5 * math.cos(angle))
        right = (bx - 5 * math.sin(angle), by + 5 * math.cos(angle))
        self.parts.append(f'<polygon points="{x2},{y2} {left[0]:.1f},{left[1]:.1f} {right[0]:.1f},{right[1]:.1f}" '
                          'class="head"/>')

    def path(self, d, cls="arrow"):
        self.parts.append(f'<path d="{d}" class="{cls}"/>')

    def marker(self, x, y, number):
        """A numbered circle: the places where `.to(device)` and friends go."""
        self.parts.append(f'<circle cx="{x}" cy="{y}" r="11" class="mark"/>')
        self.text(x, y + 5, str(number), "mark-text small", "middle")

    def svg(self) -> str:
        defs = ('<defs><pattern id="hatch" width="8" height="8" patternUnits="userSpaceOnUse" '
                'patternTransform="rotate(45)"><rect width="8" height="8" class="hatch-bg"/>'
                '<line x1="0" y1="0" x2="0" y2="8" class="hatch-line"/></pattern></defs>')
        body = "\n".join(self.parts)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
                f'width="{self.width}" height="{self.height}" role="img" aria-labelledby="title desc">\n'
                f'<title id="title">{escape(self.title)}</title>\n<desc id="desc">{escape(self.desc)}</desc>\n'
                f"<style>{STYLE}</style>\n{defs}\n"
                f'<rect x="0.5" y="0.5" width="{self.width - 1}" height="{self.height - 1}" rx="10" class="panel"/>\n'
                f"{body}\n</svg>\n")


def host_and_gpu_memory() -> Drawing:
    d = Drawing(452, 352, "Host memory and GPU memory, joined by the PCIe bus",
                "Main memory, where the CPU works, on the left; the GPU's own memory on the right; the PCIe bus "
                "between them. .to(device) copies a batch across to the GPU; .cpu() copies the logits back to main "
                "memory; .item() brings the loss back as one Python float.")
    d.rect(14, 16, 142, 320, "host")
    d.rect(164, 16, 124, 320, "bus")
    d.rect(296, 16, 142, 320, "gpu")
    d.text(85, 44, "Main memory", "bold", "middle")
    d.rich(85, 66, [("device ", "small muted"), ('"cpu"', "code")], "middle")
    d.text(226, 44, "PCIe bus", "bold", "middle")
    d.text(226, 66, "the slow link", "small muted", "middle")
    d.text(367, 44, "GPU memory", "bold", "middle")
    d.rich(367, 66, [("device ", "small muted"), ('"cuda:0"', "code")], "middle")
    rows = [("batch", "batch", ".to(device)", True), ("logits", "logits", ".cpu()", False),
            ("0.4213", "loss", ".item()", False)]
    for i, (host, gpu, call, down) in enumerate(rows):
        y = 100 + 72 * i
        d.rect(28, y, 114, 34, "item", 5)
        d.text(85, y + 22, host, "code", "middle")
        d.rect(310, y, 114, 34, "item", 5)
        d.text(367, y + 22, gpu, "code", "middle")
        d.text(226, y + 4, call, "code", "middle")
        if down:
            d.arrow(144, y + 17, 306, y + 17)
        else:
            d.arrow(308, y + 17, 146, y + 17)
    d.text(85, 298, "a Python float", "small muted", "middle")
    d.text(226, 298, "every crossing", "small muted", "middle")
    d.text(226, 316, "is a copy", "small muted", "middle")
    d.text(367, 298, "results stay here", "small muted", "middle")
    d.text(367, 316, "until you ask", "small muted", "middle")
    return d


def training_loop() -> Drawing:
    d = Drawing(440, 488, "The training loop with its three places for .to(device)",
                "Two columns, host on the left and device on the right. 1: the model is built on the host and moved "
                "to the device once, before the loop. 2: inside the loop, every batch from the DataLoader, inputs "
                "and labels, is moved to the device. The forward pass, the loss, backward and the optimizer step "
                "all happen on the device. 3: only the loss comes back, as one number with .item(), to be printed.")
    d.rect(12, 12, 150, 464, "host", 8)
    d.rect(274, 12, 154, 464, "gpu", 8)
    d.text(87, 38, "host", "bold", "middle")
    d.text(351, 38, "device", "bold", "middle")

    def crossing(y, number, call, right=True):
        d.marker(218, y - 36, number)
        d.text(218, y - 8, call, "code", "middle")
        if right:
            d.arrow(152, y, 282, y)
        else:
            d.arrow(284, y, 154, y)

    d.rect(22, 86, 130, 40, "item", 5)
    d.text(87, 111, "model = Net()", "code", "middle")
    d.rect(284, 86, 134, 40, "item", 5)
    d.text(351, 111, "model's weights", "small", "middle")
    crossing(106, 1, ".to(device)")
    d.text(87, 148, "once, at start-up", "small muted", "middle")

    d.rect(20, 164, 400, 300, "loop", 10)
    d.rich(32, 188, [("for xb, yb in loader:", "code")])
    d.text(408, 188, "every step", "small muted", "end")

    d.rect(22, 216, 130, 52, "item", 5)
    d.text(87, 238, "xb, yb", "code", "middle")
    d.text(87, 258, "from DataLoader", "small muted", "middle")
    d.rect(284, 216, 134, 52, "item", 5)
    d.text(351, 247, "xb, yb", "code", "middle")
    crossing(242, 2, ".to(device)")

    d.rect(284, 290, 134, 92, "item", 5)
    for i, step in enumerate(("forward", "loss", "backward", "optimizer step")):
        d.text(351, 311 + 20 * i, step, "small", "middle")
    d.arrow(351, 268, 351, 288)

    d.rect(284, 406, 134, 40, "item", 5)
    d.text(351, 431, "loss", "code", "middle")
    d.arrow(351, 382, 351, 404)
    d.rect(22, 406, 130, 40, "item", 5)
    d.text(87, 431, "print(0.4213)", "code", "middle")
    crossing(426, 3, ".item()", right=False)
    return d


LANE_X, LANE_W = 76, 340  # where the time axis starts, and its length


def _lane(d: Drawing, y, name, bars):
    """One row of a timeline: a name, then (start, length, class, label) bars in time units of LANE_W / 100."""
    d.text(LANE_X - 10, y + 19, name, "small", "end")
    for start, length, cls, label in bars:
        x, w = LANE_X + start * LANE_W / 100, length * LANE_W / 100
        d.rect(round(x, 1), y, round(w, 1), 28, cls, 4)
        if label:
            d.text(round(x + w / 2, 1), y + 19, label, "small", "middle")


def copy_timeline() -> Drawing:
    d = Drawing(440, 512, "Copying a batch with and without non_blocking, from pageable and from pinned memory",
                "Three timelines of copying xb and yb to the GPU. Blocking from pageable memory: the CPU stages xb, "
                "then waits until it has reached the GPU, then does the same for yb. non_blocking from pageable "
                "memory: the CPU still stages each tensor through a pinned buffer, but no longer waits for the "
                "transfers, so it is free sooner. non_blocking from pinned memory: the CPU only queues the two "
                "copies, the GPU reads the data directly, and the CPU is free almost at once.")
    panels = [
        (".to(device), pageable memory",
         [(0, 14, "stage", "stage"), (14, 16, "wait", "wait"), (30, 14, "stage", "stage"), (44, 16, "wait", "wait"),
          (60, 40, "free", "next step")],
         [(14, 16, "copy", "xb"), (44, 16, "copy", "yb")]),
        ("non_blocking=True, pageable memory",
         [(0, 14, "stage", "stage"), (14, 14, "stage", "stage"), (28, 72, "free", "free for the next step")],
         [(14, 16, "copy", "xb"), (30, 16, "copy", "yb")]),
        ("non_blocking=True, pinned memory",
         [(0, 3, "stage", ""), (3, 3, "stage", ""), (6, 94, "free", "free for the next step")],
         [(2, 16, "copy", "xb"), (18, 16, "copy", "yb")]),
    ]
    y = 16
    for title, cpu, gpu in panels:
        d.text(20, y + 20, title, "code")
        _lane(d, y + 32, "CPU", cpu)
        _lane(d, y + 66, "copy", gpu)
        y += 114
    d.arrow(LANE_X, y + 6, LANE_X + LANE_W, y + 6)
    d.text(LANE_X + LANE_W, y + 26, "time", "small muted", "end")
    legend = [("stage", "CPU busy with the copy (staging)"), ("wait", "CPU waits for the copy to finish"),
              ("copy", "data travels to the GPU"), ("free", "CPU free for other work")]
    for i, (cls, label) in enumerate(legend):
        lx, ly = 20, y + 40 + i * 26
        d.rect(lx, ly, 22, 16, cls, 3)
        d.text(lx + 30, ly + 13, label, "small")
    return d


def ddp_ranks() -> Drawing:
    d = Drawing(440, 540, "DistributedDataParallel: one process per GPU, one shard of the data each, gradients "
                "all-reduced",
                "The dataset of 128 samples is split by a DistributedSampler into two shards of 64, one per process. "
                "Process rank 0 drives GPU cuda:0 and process rank 1 drives GPU cuda:1; each GPU holds a full copy of "
                "the model and runs the forward pass, the loss and backward on its own shard, giving its own "
                "gradients. During backward an all-reduce averages the gradients across the GPUs, so both take the "
                "same optimizer step and keep identical weights.")
    d.rect(20, 16, 400, 40, "item", 5)
    d.rich(220, 41, [("128 samples, split by ", "small"), ("DistributedSampler", "code")], "middle")
    columns = [(20, 0), (230, 1)]
    for x, rank in columns:
        cx = x + 95
        d.arrow(cx, 56, cx, 82)
        d.rect(x, 84, 190, 40, "bus", 5)
        d.text(cx, 101, f"shard {rank}: 64 samples", "small", "middle")
        d.text(cx, 117, "a new order each epoch", "small muted", "middle")
        d.arrow(cx, 124, cx, 146)
        d.rect(x, 148, 190, 52, "host", 6)
        d.text(cx, 170, f"process rank {rank}", "bold", "middle")
        d.rich(cx, 190, [("LOCAL_RANK=", "code"), (str(rank), "code")], "middle")
        d.rect(x, 212, 190, 316, "gpu", 8)
        d.text(cx, 236, f"GPU cuda:{rank}", "bold", "middle")
        d.rect(x + 12, 248, 166, 36, "copy", 5)
        d.text(cx, 271, "a full copy of the model", "small", "middle")
        for i, step in enumerate(("forward, loss", f"backward: grads g{rank}")):
            d.rect(x + 12, 296 + 46 * i, 166, 34, "item", 5)
            d.text(cx, 318 + 46 * i, step, "small", "middle")
        d.rect(x + 12, 446, 166, 34, "item", 5)
        d.text(cx, 468, "optimizer step", "small", "middle")
        d.arrow(cx, 376, cx, 392)
        d.arrow(cx, 426, cx, 444)
        d.text(cx, 506, "same weights as the other", "small muted", "middle")
    d.rect(12, 394, 416, 32, "stage", 6)
    d.rich(220, 415, [("all-reduce: every GPU gets ", "small"), ("(g0 + g1) / 2", "code")], "middle")
    return d


def when_more_gpus() -> Drawing:
    d = Drawing(440, 404, "One GPU, DDP or FSDP: which one a training job needs",
                "A decision chart. First question: does the model fit on one GPU, with its gradients, optimizer "
                "state and activations? If not, shard the model itself: FSDP2 (fully_shard) or tensor parallelism, "
                "so that each GPU holds a part of it. If it fits, second question: is one GPU fast enough? If yes, "
                "stay on one GPU. If not, use DistributedDataParallel: a full copy of the model per GPU, each on its "
                "own shard of the data. DDP buys speed, not memory.")
    d.rect(40, 16, 360, 58, "item", 6)
    d.text(220, 40, "Does the model fit on one GPU?", "bold", "middle")
    d.text(220, 60, "weights, gradients, optimizer state, activations", "small muted", "middle")
    d.arrow(180, 74, 180, 128)
    d.text(190, 106, "yes", "small")
    d.arrow(340, 74, 360, 128)
    d.text(358, 100, "no", "small")
    d.rect(20, 130, 260, 48, "item", 6)
    d.text(150, 159, "Is one GPU fast enough?", "bold", "middle")
    d.arrow(80, 178, 80, 236)
    d.text(90, 212, "yes", "small")
    d.arrow(215, 178, 215, 236)
    d.text(225, 212, "no", "small")
    boxes = [(20, 238, 120, 110, "host", ["one GPU"], ["no processes,", "no sampler,", "no all-reduce"]),
             (150, 238, 130, 110, "gpu", ["DDP"], ["a full copy of", "the model per", "GPU, a shard of", "data each"]),
             (290, 130, 140, 218, "bus", ["shard the", "model itself"], [])]
    for x, y, w, h, cls, titles, lines in boxes:
        d.rect(x, y, w, h, cls, 6)
        for i, title in enumerate(titles):
            d.text(x + w / 2, y + 26 + 20 * i, title, "bold", "middle")
        for i, line in enumerate(lines):
            d.text(x + w / 2, y + 48 + 18 * i, line, "small", "middle")
    d.text(360, 206, "FSDP2", "small", "middle")
    d.text(360, 226, "fully_shard", "code", "middle")
    d.text(360, 254, "or tensor", "small", "middle")
    d.text(360, 273, "parallelism:", "small", "middle")
    d.text(360, 301, "each GPU holds", "small", "middle")
    d.text(360, 320, "a part of it", "small", "middle")
    d.text(220, 382, "DDP buys speed, not memory.", "small muted", "middle")
    return d


def two_machines_ranks() -> Drawing:
    d = Drawing(440, 516, "Two machines of two GPUs: four ranks, global and local numbers",
                "torchrun --nnodes=2 --nproc-per-node=2 on each of two machines, node0 and node1, starts four "
                "processes. On node0: RANK 0 with LOCAL_RANK 0 on GPU cuda:0, and RANK 1 with LOCAL_RANK 1 on cuda:1. "
                "On node1: RANK 2 with LOCAL_RANK 0 on cuda:0, and RANK 3 with LOCAL_RANK 1 on cuda:1. RANK and "
                "WORLD_SIZE=4 are global, numbered across the whole job; LOCAL_RANK and the GPU index are local, "
                "numbered within one machine, which has only cuda:0 and cuda:1. One process group spans all four "
                "ranks over the network, and global rank 0 alone writes the checkpoint.")
    d.rich(220, 32, [("WORLD_SIZE=4", "code"), (": four ranks on two machines", "small")], "middle")
    for node, x in ((0, 20), (1, 230)):
        cx = x + 95
        d.rect(x, 48, 190, 334, "host", 8)
        d.text(cx, 72, f"machine node{node}", "bold", "middle")
        d.rich(cx, 92, [(f"GROUP_RANK={node}", "code")], "middle")
        for i in range(2):
            rank, y = node * 2 + i, 106 + i * 128
            d.rect(x + 12, y, 166, 116, "item", 6)
            d.rect(x + 24, y + 10, 142, 28, "bus", 5)
            d.rich(cx, y + 30, [(f"RANK={rank}", "code bold")], "middle")
            d.rect(x + 24, y + 44, 142, 28, "copy", 5)
            d.rich(cx, y + 64, [(f"LOCAL_RANK={i}", "code")], "middle")
            d.rect(x + 24, y + 78, 142, 28, "gpu", 5)
            d.rich(cx, y + 98, [("GPU ", "small"), (f"cuda:{i}", "code")], "middle")
        d.text(cx, 372, "saves: rank 0 only" if node == 0 else "its own /tmp and GPUs", "small muted", "middle")
        d.path(f"M {cx} 382 V 396")
    d.rect(20, 396, 400, 40, "stage", 6)
    d.text(220, 421, "one process group over the network: all four ranks", "small", "middle")
    for y, cls, words in ((452, "bus", "global: numbered across the whole job"),
                          (482, "copy", "local: numbered within one machine")):
        d.rect(20, y, 18, 18, cls, 3)
        d.text(46, y + 14, words, "small")
    return d


FIGURES = {
    "host-and-gpu-memory.svg": host_and_gpu_memory,
    "training-loop-to-device.svg": training_loop,
    "non-blocking-timeline.svg": copy_timeline,
    "ddp-ranks.svg": ddp_ranks,
    "when-more-gpus.svg": when_more_gpus,
    "two-machines-ranks.svg": two_machines_ranks,
}


def render() -> dict[str, str]:
    """Every figure's SVG text, by file name."""
    return {name: build().svg() for name, build in FIGURES.items()}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    OUT.mkdir(exist_ok=True)
    for name, text in render().items():
        path = OUT / name
        if check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"out of date: {', '.join(stale)}; run `make figures`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
