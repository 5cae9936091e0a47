"""MIND (CSU-JPG/MIND, arXiv 2602.08025): memory consistency and action control of interactive world models.

Long-context memory (generated continuation vs the GT after ``mark_time``: MSE, PSNR, SSIM, LPIPS), the mirror
test, DINOv3 patch MSE, visual quality (MUSIQ-SPAQ, LAION aesthetic), action accuracy (RPE after Umeyama
Sim(3)) and an action gate, over MIND-Data's first- and third-person clips. Differences from the release:
docs/mind.md.
"""
