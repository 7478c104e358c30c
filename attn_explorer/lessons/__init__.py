"""attn_explorer.lessons"""
