"""The model workloads: ResNet50 and GPT training, the real input pipeline, DDP scaling, the
largest model that fine-tunes here, and batch inference; one folder each (config.py + run.py),
with the shared trainer (_training.py) and the models (models/). They use what probes/ shares
(the loaders, the device helpers, the probe API); probes/ never imports them."""
