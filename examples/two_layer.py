"""A two-layer model and a few training steps on random data (runs on cpu or cuda)."""
import minifused as mf

mf.manual_seed(0)
x = mf.randn(64, 784)
y = mf.randint(0, 10, (64,))
w1 = (mf.randn(784, 256) * 0.05).requires_grad_()
w2 = (mf.randn(256, 10) * 0.05).requires_grad_()

for step in range(5):
    logits = (x @ w1).relu() @ w2
    logp = logits - logits.exp().sum(1, keepdim=True).log()  # log-softmax
    loss = -logp[mf.arange(64), y].mean()
    w1.grad = w2.grad = None
    loss.backward()
    with mf.no_grad():
        w1 -= 0.1 * w1.grad
        w2 -= 0.1 * w2.grad
    print(f"step {step}: loss {loss.item():.4f} on {x.device}")
