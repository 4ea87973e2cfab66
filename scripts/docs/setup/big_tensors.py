# What a checkpoint would hold; small here, so the "sharded" save writes one file.
import numpy as np
big_tensors = {"w": np.ones((64, 32), np.float32), "b": np.zeros(32, np.float32)}
