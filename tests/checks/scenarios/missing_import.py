import definitely_not_a_real_package_ml_skills  # noqa: F401
import torch

print(torch.__version__)
