"""attn_explorer.ui"""
