#!/usr/bin/python3
"""Train a small MLP on scikit-learn's 8x8 digits and export it for nnc.

    /usr/bin/python3 examples/digits/train.py        (from anywhere; writes next to this file)

Data: sklearn.datasets.load_digits() (1,797 images of 8x8 pixels with values 0..16;
ships inside python3-sklearn, nothing is downloaded). Pixels are divided by 16, so
the inputs are in [0, 1]. Split: train_test_split(test_size=360, random_state=0,
stratify=labels) -> 1,437 training and 360 held-out images.

Model: 64 -> 64 -> 32 -> 10 with ReLU, layers named fc1, fc2, fc3; the output is 10
logits (no softmax: argmax of the logits is the predicted digit).
Training: Adam, lr 1e-2, 60 epochs of minibatches of 64, seed 0, one thread: a few
seconds on a CPU, deterministic.

Writes (all beside this file):
  digits.nn                the nnc program
  digits.safetensors       fc1/fc2/fc3 .weight [out, in] and .bias, f32
  test_images.npy          float32 [360, 64], already scaled to [0, 1]
  test_labels.npy          int32 [360]
  test_images_5.npy        float32 [5, 64], the first 5 held-out images
  pytorch_logits.npy       float32 [360, 10], PyTorch's f32 eval-mode logits
  pytorch_predictions.npy  int32 [360], argmax of those logits
  pytorch_accuracy.txt     PyTorch's held-out accuracy
"""
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 0
EPOCHS = 60
BATCH = 64
LR = 1e-2


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "fixtures"))
from safetensors_io import write_safetensors  # noqa: E402  (shared with the fixture script)


class DigitsMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 32)
        self.fc3 = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


NN_SRC = """\
# batch: 360 (the whole held-out set; the README demo uses --batch 5)
# MLP for scikit-learn's 8x8 digits, trained by train.py beside this file.
# Input: 64 pixels scaled to [0, 1] (pixel / 16). Output: 10 logits, no softmax;
# the predicted digit is the argmax.
# 64 -> 64 -> 32 -> 10: 6,570 parameters (4,160 + 2,080 + 330)
model digits {
  input x: [64]
  fc1 = dense(64) relu
  fc2 = dense(32) relu
  fc3 = dense(10)
}
"""


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    data = load_digits()
    X = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=360, random_state=SEED, stratify=y)

    model = DigitsMLP()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss()
    Xt, yt = torch.from_numpy(X_tr), torch.from_numpy(y_tr)
    g = torch.Generator().manual_seed(SEED)
    for epoch in range(EPOCHS):
        model.train()
        perm = torch.randperm(len(Xt), generator=g)
        total = 0.0
        for i in range(0, len(Xt), BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad()
            loss = loss_fn(model(Xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        if epoch % 20 == 19 or epoch == EPOCHS - 1:
            print(f"epoch {epoch + 1:3d}  train loss {total / len(Xt):.4f}")

    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(X_te)).numpy().astype(np.float32)
        train_acc = (model(Xt).argmax(1).numpy() == y_tr).mean()
    pred = logits.argmax(axis=1).astype(np.int32)
    correct = int((pred == y_te).sum())
    acc = correct / len(y_te)
    print(f"train accuracy {train_acc:.4f}")
    print(f"held-out accuracy {acc:.4f} ({correct}/{len(y_te)})")
    assert acc > 0.95, acc

    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    write_safetensors(os.path.join(HERE, "digits.safetensors"), sd)
    with open(os.path.join(HERE, "digits.nn"), "w") as f:
        f.write(NN_SRC)
    np.save(os.path.join(HERE, "test_images.npy"), np.ascontiguousarray(X_te, dtype="<f4"))
    np.save(os.path.join(HERE, "test_labels.npy"), y_te.astype("<i4"))
    np.save(os.path.join(HERE, "test_images_5.npy"), np.ascontiguousarray(X_te[:5], dtype="<f4"))
    np.save(os.path.join(HERE, "pytorch_logits.npy"), logits.astype("<f4"))
    np.save(os.path.join(HERE, "pytorch_predictions.npy"), pred.astype("<i4"))
    with open(os.path.join(HERE, "pytorch_accuracy.txt"), "w") as f:
        f.write(f"held-out accuracy {acc:.4f} ({correct}/{len(y_te)})\n")
        f.write(f"torch {torch.__version__}, seed {SEED}, {EPOCHS} epochs Adam lr {LR} batch {BATCH}\n")
        f.write("first 5 test labels: " + " ".join(str(int(v)) for v in y_te[:5]) + "\n")
        f.write("first 5 predictions: " + " ".join(str(int(v)) for v in pred[:5]) + "\n")
    print("first 5 labels     ", y_te[:5].tolist())
    print("first 5 predictions", pred[:5].tolist())


if __name__ == "__main__":
    main()
