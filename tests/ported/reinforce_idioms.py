"""REINFORCE, written as a PyTorch user writes it: a policy MLP ending in a softmax, ``Categorical(probs)``,
``m.sample()`` and ``m.log_prob(action)`` kept on the module between updates, discounted returns normalized by
``(r - r.mean()) / (r.std() + eps)`` with ``eps = np.finfo(np.float32).eps.item()``, the loss
``torch.cat(policy_loss).sum()``, Adam, one update per episode. The environment is a small deterministic one in
NumPy: a point on a line, pushed left, held or pushed right, rewarded for staying near the origin.

``--numpy-actions`` draws each action from the policy's probabilities with NumPy's generator (seeded by
``--seed``) instead of ``m.sample()``, so that two frameworks that compute the same probabilities take the same
actions. Only the imports name the framework.

``main`` returns, for every episode, its cost: the distance to the origin expected after a step under the
policy's probabilities, averaged over the episode's states."""
import argparse

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical


class LineWorld:
    """A point starts somewhere on [-1, 1]; each step moves it by -step, 0 or +step and pays what it came nearer
    the origin (``|x| - |x'|``)."""

    def __init__(self, seed, horizon=20, step=0.2):
        self.rng = np.random.default_rng(seed)
        self.horizon, self.step_size = horizon, step

    def reset(self):
        self.x, self.t = self.rng.uniform(-1.0, 1.0), 0
        return self.observation()

    def observation(self):
        return np.array([self.x, abs(self.x), self.t / self.horizon])

    def moved(self, action):
        return float(np.clip(self.x + self.step_size * (action - 1), -2.0, 2.0))

    def step(self, action):
        before = abs(self.x)
        self.x = self.moved(action)
        self.t += 1
        return self.observation(), before - abs(self.x), self.t >= self.horizon


class Policy(nn.Module):
    def __init__(self, observations=3, actions=3, hidden=32, dropout=0.6):
        super().__init__()
        self.affine1 = nn.Linear(observations, hidden)
        self.dropout = nn.Dropout(p=dropout)
        self.affine2 = nn.Linear(hidden, actions)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


def select_action(policy, state, device, rng=None):
    state = torch.from_numpy(state).float().unsqueeze(0).to(device)
    probs = policy(state)
    m = Categorical(probs)
    if rng is None:
        action = m.sample()
    else:  # inverse CDF on NumPy's draw
        cdf = np.cumsum(probs.detach().cpu().numpy()[0].astype(np.float64))
        index = min(int(np.searchsorted(cdf, rng.random() * cdf[-1])), len(cdf) - 1)
        action = torch.tensor([index], device=device)
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item(), probs[0].tolist()


def finish_episode(policy, optimizer, gamma, eps):
    R = 0
    policy_loss = []
    returns = []
    for r in policy.rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns.to(policy.saved_log_probs[0].device)):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    return policy_loss.item()


def parse_args(argv):
    p = argparse.ArgumentParser(description="REINFORCE on a one-dimensional toy environment")
    p.add_argument("--steps", type=int, default=200, help="episodes, one update each")
    p.add_argument("--gamma", type=float, default=0.9)
    p.add_argument("--lr", type=float, default=3e-2)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--dropout", type=float, default=0.6)
    p.add_argument("--numpy-actions", action="store_true")
    p.add_argument("--device", default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None, init=None):
    """Train; ``init(name, params)``, if given, may set the policy's initial parameters in place."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    env = LineWorld(args.seed)
    action_rng = np.random.default_rng(args.seed + 1) if args.numpy_actions else None
    policy = Policy(hidden=args.hidden, dropout=args.dropout).to(device)
    if init is not None:
        init("policy", dict(policy.named_parameters()))
    optimizer = optim.Adam(policy.parameters(), lr=args.lr)
    eps = np.finfo(np.float32).eps.item()
    costs = []
    running_reward = None
    for episode in range(args.steps):
        state, ep_reward, done = env.reset(), 0.0, False
        expected_distance = 0.0
        while not done:
            action, probs = select_action(policy, state, device, action_rng)
            expected_distance += sum(p * abs(env.moved(a)) for a, p in enumerate(probs))
            state, reward, done = env.step(action)
            policy.rewards.append(reward)
            ep_reward += reward
        running_reward = ep_reward if running_reward is None else 0.05 * ep_reward + 0.95 * running_reward
        loss = finish_episode(policy, optimizer, args.gamma, eps)
        costs.append(expected_distance / env.horizon)
        if episode % 10 == 0:
            print(f"episode {episode}: reward {ep_reward:.2f}, running {running_reward:.2f}, loss {loss:.3f}")
    return costs


if __name__ == "__main__":
    main()
