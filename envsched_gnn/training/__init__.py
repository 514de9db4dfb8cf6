"""The policy, the batched rollout engine, SFT and GRPO training with Lightning."""
