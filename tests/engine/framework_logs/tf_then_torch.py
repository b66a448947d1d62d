"""Produces tf-startup-then-torch-traceback.log: a PyTorch run that imports TensorFlow on the side (as tensorboard or
transformers may), so TensorFlow's start-up lines come first, then fails in torch with a shape error.

    pip install tensorflow-cpu==2.15.1   # in a separate venv with --system-site-packages, beside torch
    python tf_then_torch.py > tf-startup-then-torch-traceback.log 2>&1
"""
import tensorflow as tf  # start-up lines on stderr
import torch

tf.constant([1.0])  # TensorFlow initialises its runtime and logs
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(16, 8)
    y = torch.randint(0, 4, (16,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
loss = torch.nn.functional.cross_entropy(model(torch.randn(16, 7)), y)  # wrong input width
