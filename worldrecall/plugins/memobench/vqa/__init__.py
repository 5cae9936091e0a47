"""MemoBench VQA: question banks, the memobench.vqa metric and the bank builder."""
