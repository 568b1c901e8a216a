import numpy as np
import torch


def to_numpy(t):
    return t.detach().to("cpu").numpy()
