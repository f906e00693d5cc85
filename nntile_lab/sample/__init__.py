"""``nntile-lab sample``: text from a run or a Hugging Face GPT-2 file (load, text, cli)."""
