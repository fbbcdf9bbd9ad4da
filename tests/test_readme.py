"""The README's example runs as written and its training step lowers the loss."""
import re
from pathlib import Path

import minifused as mf


def test_readme_example_trains():
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    env = {}
    exec(compile(code, "README.md", "exec"), env)
    model, x, y, opt, F = env["model"], env["x"], env["y"], env["opt"], env["F"]
    before = env["loss"].item()
    for _ in range(5):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < before and isinstance(loss, mf.Tensor)
