"""Video input: mp4/webm/avi files and folders of png/jpg frames, decoded once per run and shared.

Every metric asks the same :class:`Video` object for frames; the first request decodes, later ones
reuse the array (and the resized views derived from it). :class:`VideoPool` hands out one ``Video``
per path for the whole run and counts decodes, so "decoded at most once" is measurable. Memory follows
what is compared (:meth:`Video.frames_at`) within a per-process budget (``video.max_bytes``).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from worldrecall.core.digests import content_memo, file_digest

VIDEO_SUFFIXES = {".mp4", ".webm", ".avi", ".mov", ".mkv"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}

# Resource limits checked from headers / container metadata BEFORE decoding (config ``video.max_pixels`` /
# ``video.max_frames``): one 20000x20000 PNG is 1.2 GB of RGB and an absurd frame count a multi-GB decode —
# either would kill a worker instead of failing one case. 40 Mpx ≈ 8K×5K; 100000 frames ≈ 55 min at 30 fps.
DEFAULT_MAX_PIXELS = 40_000_000
DEFAULT_MAX_FRAMES = 100_000
DEFAULT_MAX_BYTES = 2 << 30  # decoded frames a process holds: a 1080p x 345-frame or 720p x 776-frame video


def _container_fps(path: Path) -> float | None:
    import cv2

    cap = cv2.VideoCapture(str(path))
    fps = cap.get(cv2.CAP_PROP_FPS)
    cap.release()
    return float(fps) if fps and fps > 0 else None

class VideoError(Exception):
    """A video that cannot be read; the message names the file and the problem."""


class VideoLimitError(VideoError):
    """A video over the pixel, frame or byte cap (``video.max_pixels`` / ``max_frames`` / ``max_bytes``)."""


class FrameIndexError(VideoError):
    def __init__(self, path: Path, index: int, count: int, decodable: bool):
        """A frame index outside ``[0, count)`` (``decodable``: a count of decoded frames, else of files)."""
        self.index, self.count, self.decodable = index, count, decodable
        super().__init__(f"{path}: frame {index} out of range ({count} {'decodable ' * decodable}frames)")


def list_frame_files(folder: Path, suffixes: set[str] = IMAGE_SUFFIXES) -> list[Path]:
    """Image files of a frame folder, sorted lexicographically (the official convention). A folder that cannot
    be listed, or a frame entry whose type cannot be read (a symlink loop, a target name too long), is a
    :class:`VideoError` naming it: skipping the entry would shift every later frame index."""
    folder = Path(folder)
    names, entry = [], folder
    try:
        with os.scandir(folder) as it:  # one listing, file types from it: no stat per frame
            for e in it:
                entry = folder / e.name
                if os.path.splitext(e.name)[1].lower() in suffixes and e.is_file():
                    names.append(e.name)
    except OSError as e:
        what = "cannot list the frame folder" if entry == folder else "frame file cannot be read"
        raise VideoError(f"{entry}: {what} ({e.strerror or type(e).__name__})") from None
    return [folder / n for n in sorted(names)]


def fit_size(frame: np.ndarray, size: tuple[int, int] | None) -> np.ndarray:
    """``frame`` stretched to ``size`` = (width, height), INTER_AREA, no crop; unchanged at that size already."""
    import cv2

    if size is None or frame.shape[1::-1] == tuple(size):
        return frame
    return cv2.resize(frame, (int(size[0]), int(size[1])), interpolation=cv2.INTER_AREA)


def resize_max_side(frame: np.ndarray, max_side: int) -> np.ndarray:
    """Downsize (never upscale) so the long side is ``max_side``; INTER_AREA, size = Python round(w*s)."""
    import cv2

    h, w = frame.shape[:2]
    long_side = max(h, w)
    if max_side <= 0 or long_side <= max_side:
        return frame
    s = max_side / long_side
    return cv2.resize(frame, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA)


class Video:
    """A generated or reference video, decoded lazily into an ``[N, H, W, 3]`` uint8 RGB array."""

    def __init__(self, path: Path | str, *, fps: float | None = None, pool: VideoPool | None = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS, max_frames: int = DEFAULT_MAX_FRAMES, max_bytes: int = 0):
        """Checked before decoding (0 or less: none): ``max_pixels`` per frame, ``max_frames``, ``max_bytes`` decoded."""
        self.path = Path(path)
        self._fps = fps
        self._pool = pool
        self.max_pixels = int(max_pixels)
        self.max_frames, self.max_bytes = int(max_frames), int(max_bytes)
        self._frames: np.ndarray | None = None
        self._resized: dict[int, np.ndarray] = {}
        self._at: dict[tuple[int, int] | None, dict[int, np.ndarray]] = {}  # frames_at: size -> index -> frame
        self._hash: str | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Video({str(self.path)!r})"

    def known(self) -> tuple[Path, float | None, str | None]:
        """Path, frame rate and content hash as known so far (None: not read yet), for :meth:`VideoPool.adopt`."""
        return self.path, self._fps, self._hash

    @property
    def is_frame_folder(self) -> bool:
        return self.path.is_dir()

    # -- identity -------------------------------------------------------------------------------
    def content_hash(self) -> str:
        """sha256 of the file bytes (or of the sorted frame files' names and bytes)."""
        if self._hash is None:
            if not self.path.exists():
                raise VideoError(f"{self.path}: does not exist")
            if self.is_frame_folder:
                h = hashlib.sha256()
                for p in list_frame_files(self.path):
                    h.update(p.name.encode())
                    try:
                        h.update(file_digest(p).encode())
                    except OSError as e:  # listed, then unreadable (permissions, gone): this frame's error
                        raise VideoError(f"{p}: frame file cannot be read ({e.strerror or type(e).__name__})") from None
                self._hash = h.hexdigest()
            else:
                self._hash = file_digest(self.path)
        return self._hash

    # -- decoding -------------------------------------------------------------------------------
    def frames(self) -> np.ndarray:
        """All frames as ``[N, H, W, 3]`` uint8 RGB (decoded on first call, then shared)."""
        with self._lock:
            if self._frames is None:
                self._frames = self._decode()
                if self._pool is not None:
                    self._pool._decoded(self)
            if self._pool is not None:
                self._pool._grew(self)
            return self._frames

    def frames_at(self, indices: Sequence[int], size: tuple[int, int] | None = None) -> list[np.ndarray]:
        """Frames at ``indices``, native or stretched to ``size`` = (width, height) (INTER_AREA), kept at that
        size only; a frame folder reads just these files, a video is decoded whole once (:meth:`frames`).
        Pixels equal ``fit_size(frames()[i], size)``; :class:`FrameIndexError` outside the video."""
        memo = self._at.setdefault(None if size is None else (int(size[0]), int(size[1])), {})
        if missing := sorted({int(i) for i in indices} - set(memo)):
            whole = None if self.is_frame_folder and self._frames is None else self.frames()
            files = list_frame_files(self.path) if whole is None else []
            n = len(files) if whole is None else len(whole)
            if bad := [i for i in missing if not 0 <= i < n]:
                raise FrameIndexError(self.path, bad[0], n, decodable=whole is not None)
            lim = _Limits(self.max_pixels, self.max_frames)
            memo.update({i: fit_size(read_image(files[i], lim.max_pixels) if whole is None else whole[i], size) for i in missing})
        if self._pool is not None:
            self._pool._grew(self)
        return [memo[int(i)] for i in indices]

    def frame(self, i: int) -> np.ndarray:
        """Frame ``i``, clamped to ``[0, N-1]`` as the official readers do."""
        fr = self.frames()
        return fr[min(max(int(i), 0), len(fr) - 1)]

    def resized(self, max_side: int) -> np.ndarray:
        """All frames downsized so the long side is at most ``max_side`` (computed once per size)."""
        if max_side not in self._resized:
            fr = self.frames()
            if max(fr.shape[1:3]) <= max_side or max_side <= 0:
                self._resized[max_side] = fr
            else:
                self._resized[max_side] = np.stack([resize_max_side(f, max_side) for f in fr])
                if self._pool is not None:
                    self._pool._grew(self)
        return self._resized[max_side]

    @property
    def num_frames(self) -> int:
        """Decoded frame count (from the pool's facts cache when this content was decoded before)."""
        return int(self._facts()["num_frames"])

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the decoded frames."""
        f = self._facts()
        return int(f["width"]), int(f["height"])

    def _facts(self) -> dict[str, int]:
        # An aligner needs N before any metric runs; a warm run should not decode every video for it.
        if self._frames is None and self._pool is not None:
            known = self._pool.facts(self)
            if known is not None:
                return known
        f = self.frames()
        facts = {"num_frames": int(f.shape[0]), "height": int(f.shape[1]), "width": int(f.shape[2])}
        if self._pool is not None:
            self._pool.remember(self, facts)
        return facts

    @property
    def fps(self) -> float | None:
        if self._fps is None and not self.is_frame_folder and self.path.exists():
            # the container is opened once per file state, not once per job (a sweep, a warm rerun)
            self._fps = content_memo(self.path, "video.fps", lambda: _container_fps(self.path), persist=True)
        return self._fps

    def release(self) -> None:
        """Drop decoded frames (past the pool's budget, or once the run needs this video no more)."""
        with self._lock:
            self._frames = None
            self._resized.clear()
            self._at.clear()
        if self._pool is not None:
            self._pool._lru.pop(self.path, None)

    @property
    def nbytes(self) -> int:
        n = 0 if self._frames is None else self._frames.nbytes
        n += sum(f.nbytes for memo in self._at.values() for f in memo.values())
        return n + sum(a.nbytes for k, a in self._resized.items() if a is not self._frames)

    def _decode(self) -> np.ndarray:
        p = self.path
        if not p.exists():
            raise VideoError(f"{p}: does not exist")
        limits = _Limits(self.max_pixels, self.max_frames, self.max_bytes)
        if p.is_dir():
            return _decode_folder(p, limits)
        if p.stat().st_size == 0:
            raise VideoError(f"{p}: empty file (0 bytes)")
        if p.suffix.lower() not in VIDEO_SUFFIXES:
            raise VideoError(f"{p}: unsupported video type {p.suffix!r}")
        cap = _check_container(p, limits)
        try:
            frames = _decode_cv2(p, limits, cap)
        except VideoLimitError:
            raise
        except VideoError:
            frames = _decode_pyav(p, limits)  # OpenCV is fastest; PyAV reads some files OpenCV refuses
        return frames


class _Limits:
    """The per-frame pixel cap, per-video frame cap and decoded-bytes cap of one decode (<= 0: unlimited)."""

    def __init__(self, max_pixels: int, max_frames: int, max_bytes: int = 0):
        self.max_pixels, self.max_frames, self.max_bytes = int(max_pixels), int(max_frames), int(max_bytes)

    def nbytes(self, where: Path, n: int, w: int, h: int, what: str) -> None:
        if self.max_bytes > 0 and n * w * h * 3 > self.max_bytes:
            gib = lambda b: f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.1f} MiB"
            raise VideoLimitError(
                f"{where}: decoding {n} {what} of {w}x{h} needs {gib(n * w * h * 3)}, over the per-worker frame "
                f"budget of {gib(self.max_bytes)} (video.max_bytes={self.max_bytes}); raise video.max_bytes "
                f"(and run fewer workers if memory is short)")

    def most_frames(self, w: int, h: int) -> int:
        """The most frames of ``w`` x ``h`` the frame and byte caps let one video decode."""
        caps = [self.max_frames] if self.max_frames > 0 else []
        caps += [self.max_bytes // max(w * h * 3, 1)] if self.max_bytes > 0 else []
        return min(caps, default=1 << 40)

    def pixels(self, where: Path, w: int, h: int) -> None:
        if self.max_pixels > 0 and w * h > self.max_pixels:
            raise VideoLimitError(f"{where}: frame size {w}x{h} ({w * h / 1e6:.1f} Mpx) exceeds the limit of "
                             f"{self.max_pixels / 1e6:g} Mpx per frame (video.max_pixels)")

    def frames(self, where: Path, n: int, what: str = "frames") -> None:
        if self.max_frames > 0 and n > self.max_frames:
            raise VideoLimitError(f"{where}: {n} {what} exceed the limit of {self.max_frames} frames per video "
                             "(video.max_frames)")


def _check_container(p: Path, limits: _Limits) -> object | None:
    """Frame size and declared frame count from the container header (OpenCV, else PyAV), before decoding.
    Returns OpenCV's capture, still at frame 0, when OpenCV read the header (the decoder goes on with it)."""
    import cv2

    cap = cv2.VideoCapture(str(p), cv2.CAP_ANY, [cv2.CAP_PROP_N_THREADS, 1])  # a worker's one thread (same pixels)
    try:
        if cap.isOpened():
            w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
            n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
            limits.pixels(p, w, h)
            limits.frames(p, n, "declared frames")
            limits.nbytes(p, n, w, h, "declared frames")
            cap, opened = None, cap
            return opened
    finally:
        if cap is not None:
            cap.release()
    try:
        import av

        with av.open(str(p)) as container:
            st = container.streams.video[0]
            w, h, n = int(st.codec_context.width or 0), int(st.codec_context.height or 0), int(st.frames or 0)
    except VideoError:
        raise
    except Exception:  # unreadable header: the decoders below report it in their own words
        return
    limits.pixels(p, w, h)
    limits.frames(p, n, "declared frames")
    limits.nbytes(p, n, w, h, "declared frames")


def _decode_cv2(p: Path, limits: _Limits | None = None, cap: object | None = None) -> np.ndarray:
    import cv2

    limits = limits or _Limits(0, 0)
    cap = cap or cv2.VideoCapture(str(p), cv2.CAP_ANY, [cv2.CAP_PROP_N_THREADS, 1])  # one thread (same pixels)
    if not cap.isOpened():
        raise VideoError(f"{p}: cannot be opened (corrupt or truncated container?)")
    # RGB frames go straight into one array sized from the header (doubled while it under-declares) and the
    # decoder refills one BGR buffer: no allocation per frame, no stacking copy at the end
    out, n, bgr, resized = None, 0, None, False
    try:
        while (got := cap.read(bgr))[0]:
            bgr = got[1]
            if out is None:  # the header may have hidden the size: check the first decoded frame too
                limits.pixels(p, int(bgr.shape[1]), int(bgr.shape[0]))
                most = limits.most_frames(int(bgr.shape[1]), int(bgr.shape[0]))  # one more frame fails the caps
                out = np.empty((min(max(int(cap.get(cv2.CAP_PROP_FRAME_COUNT)), 1), 4096, most + 1), *bgr.shape),
                               np.uint8)
            if n == len(out):  # the header under-declared: grow, within the caps, copying the frames decoded
                out, old = np.empty((min(2 * n, most + 1), *out.shape[1:]), np.uint8), out
                out[:n] = old
            if not (resized := resized or bgr.shape != out.shape[1:]):
                cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB, dst=out[n])
            n += 1  # a container may under-declare its frames: stop as soon as a cap is passed
            limits.frames(p, n, "decoded frames (or more)")
            limits.nbytes(p, n, int(bgr.shape[1]), int(bgr.shape[0]), "decoded frames (or more)")
    finally:
        cap.release()
    if out is None:
        raise VideoError(f"{p}: no decodable frames (corrupt or truncated?)")
    if resized:
        raise VideoError(f"{p}: frames change size mid-stream")
    return out if n == len(out) else out[:n].copy()


def _decode_pyav(p: Path, limits: _Limits | None = None) -> np.ndarray:
    import av

    limits = limits or _Limits(0, 0)
    out: list[np.ndarray] = []
    try:
        with av.open(str(p)) as container:
            for f in container.decode(video=0):
                limits.pixels(p, int(f.width), int(f.height))
                out.append(f.to_ndarray(format="rgb24"))
                limits.frames(p, len(out), "decoded frames (or more)")
                limits.nbytes(p, len(out), int(f.width), int(f.height), "decoded frames (or more)")
    except VideoError:
        raise
    except Exception as e:  # PyAV raises many error types; all mean "unreadable"
        raise VideoError(f"{p}: cannot be decoded ({type(e).__name__}: {str(e).splitlines()[0][:120]})") from None
    if not out:
        raise VideoError(f"{p}: no decodable frames (corrupt or truncated?)")
    return np.stack(out)


def _image_size(f: Path) -> tuple[int, int] | None:
    """(width, height) from the image header only; None when PIL cannot parse it (cv2 then reports it).

    PIL's format openers parse just the header. They are called directly because ``Image.open`` refuses
    images over its own decompression-bomb bound (~179 Mpx) without saying their size.
    """
    try:
        from PIL import Image

        Image.init()
        with open(f, "rb") as fp:
            prefix = fp.read(16)
            for fmt in Image.ID:
                factory, accept = Image.OPEN[fmt]
                if accept is not None and not accept(prefix):
                    continue
                fp.seek(0)
                try:
                    im = factory(fp, str(f))
                except Exception:  # not this format
                    continue
                return int(im.size[0]), int(im.size[1])
            # OpenCV also decodes Radiance HDR and PFM whatever the suffix; PIL cannot size them
            head = (prefix + fp.read(4096)).split(b"\n")
            if head[0].startswith((b"#?RADIANCE", b"#?RGBE")):
                res = next(ln for ln in head[1:] if ln[:2] in (b"-Y", b"+Y", b"-X", b"+X")).split()
                return (int(res[3]), int(res[1])) if res[0][1:] == b"Y" else (int(res[1]), int(res[3]))
            if head[0].strip() in (b"PF", b"Pf"):
                w, h = head[1].split()[:2]
                return int(w), int(h)
    except Exception:  # unreadable file: the decoder reports it
        return None
    return None


def _check_header(f: Path, limits: _Limits) -> None:
    size = _image_size(f)
    if size is None:
        raise VideoError(f"{f}: unreadable image (no header giving its size, checked against video.max_pixels)")
    limits.pixels(f, *size)


def read_image(f: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """One image file as uint8 RGB; its size is read from the header and checked against ``max_pixels``
    before decoding (a size no header gives is refused under a cap). VideoError naming the file."""
    import cv2

    if max_pixels > 0:
        _check_header(f, _Limits(max_pixels, 0))
    img = cv2.imread(str(f), cv2.IMREAD_COLOR)
    if img is None:
        raise VideoError(f"{f}: unreadable image")
    _Limits(max_pixels, 0).pixels(f, int(img.shape[1]), int(img.shape[0]))  # whatever OpenCV decoded
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def _decode_folder(p: Path, limits: _Limits | None = None) -> np.ndarray:
    limits = limits or _Limits(0, 0)
    files = list_frame_files(p)
    if not files:
        raise VideoError(f"{p}: frame folder has no .png/.jpg/.jpeg files")
    limits.frames(p, len(files), "frame files")
    if limits.max_pixels > 0:
        for f in files:  # headers first: one oversized file must not be decoded at all
            _check_header(f, limits)
    if limits.max_bytes > 0 and (first := _image_size(files[0])) is not None:
        limits.nbytes(p, len(files), *first, "frame files")
    out = [read_image(f, limits.max_pixels) for f in files]
    if bad := next((f for f, a in zip(files, out) if a.shape != out[0].shape), None):
        raise VideoError(f"{p}: mixed frame sizes ({out[0].shape[1]}x{out[0].shape[0]} vs {bad.name})")
    return np.stack(out)


def small_frames(path: Path | str, indices: Sequence[int], max_side: int, *, axis_len: int | None = None,
                 max_pixels: int | None = None, max_frames: int | None = None) -> dict[int, np.ndarray]:
    """Frames ``indices`` of a video or frame folder as RGB, each downsized (never up) to ``max_side`` the moment
    it is read, so memory is a few small frames whatever the video's size: a frame folder reads only those files
    (a JPEG decoded at 1/2, 1/4 or 1/8 scale by libjpeg), a container is stepped through frame by frame and only
    the wanted frames are converted. Indices are clamped to the video; with ``axis_len`` they live on another
    video's axis of that many frames and map onto this one proportionally. :class:`VideoError` naming the file.
    Caps (None: the module's defaults, as they are when called)."""
    p = Path(path)
    max_pixels = DEFAULT_MAX_PIXELS if max_pixels is None else max_pixels
    max_frames = DEFAULT_MAX_FRAMES if max_frames is None else max_frames

    def pick(n: int) -> dict[int, int]:
        scale = (n - 1) / (axis_len - 1) if axis_len and axis_len > 1 else 1.0
        return {int(i): min(max(round(int(i) * scale), 0), n - 1) for i in indices}
    if p.is_dir():
        files = list_frame_files(p)
        if not files:
            raise VideoError(f"{p}: frame folder has no .png/.jpg/.jpeg files")
        return {i: small_image(files[j], max_side, max_pixels) for i, j in pick(len(files)).items()}
    if not p.is_file():
        raise VideoError(f"{p}: does not exist")
    limits, count = _Limits(max_pixels, max_frames), None
    for _ in range(2):  # the declared count first; again on the decoded count when the container misdeclared it
        n, frames = _stepper(p, limits, count)
        want, got, k = pick(max(n, 1)), {}, 0
        wanted = set(want.values())
        try:
            for k, rgb in enumerate(frames, 1):
                limits.frames(p, k, "decoded frames (or more)")
                if k - 1 in wanted:
                    img = rgb()
                    limits.pixels(p, int(img.shape[1]), int(img.shape[0]))
                    got[k - 1] = resize_max_side(img, max_side)
        finally:
            frames.close()
        if k == 0:
            raise VideoError(f"{p}: no decodable frames (corrupt or truncated?)")
        if k == n:
            return {i: got[j] for i, j in want.items()}
        count = k
    raise VideoError(f"{p}: decodes to a different number of frames each time")


def _stepper(p: Path, limits: _Limits, count: int | None) -> tuple[int, Generator[Callable[[], np.ndarray]]]:
    """(frame count: ``count`` or the container's, a generator of per-frame getters returning RGB), the header
    checked against the caps first. OpenCV decodes each frame (``grab``) and converts only those asked for;
    PyAV reads the files OpenCV cannot open."""
    import cv2

    cap = _check_container(p, limits)
    if cap is not None:
        def cv_frames() -> Generator[Callable[[], np.ndarray]]:
            try:
                while cap.grab():
                    yield lambda: cv2.cvtColor(cap.retrieve()[1], cv2.COLOR_BGR2RGB)
            finally:
                cap.release()
        return (count if count is not None else int(cap.get(cv2.CAP_PROP_FRAME_COUNT))), cv_frames()

    def av_frames() -> Generator[Callable[[], np.ndarray]]:
        import av

        try:
            with av.open(str(p)) as container:
                for f in container.decode(video=0):
                    yield lambda f=f: f.to_ndarray(format="rgb24")
        except Exception as e:  # noqa: BLE001  (PyAV raises many error types; all mean "unreadable")
            raise VideoError(f"{p}: cannot be decoded ({type(e).__name__}: {str(e).splitlines()[0][:120]})") from None
    return (count if count is not None else 0), av_frames()  # a count unknown: the first pass counts


def small_image(f: Path, max_side: int, max_pixels: int | None = None) -> np.ndarray:
    """One image file as RGB at most ``max_side`` on its long side; a JPEG is decoded at the smallest DCT
    scale that still covers ``max_side`` (never the full-size pixels). Size checked from the header first."""
    import cv2

    size = _image_size(f)
    if size is None:
        raise VideoError(f"{f}: unreadable image (no header giving its size, checked against video.max_pixels)")
    _Limits(DEFAULT_MAX_PIXELS if max_pixels is None else max_pixels, 0).pixels(f, *size)
    jpeg = f.suffix.lower() in (".jpg", ".jpeg")
    k = next((k for k in (8, 4, 2) if jpeg and max_side > 0 and max(size) // k >= max_side), 1)
    flag = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
            8: cv2.IMREAD_REDUCED_COLOR_8}[k]
    img = cv2.imread(str(f), flag)
    if img is None:
        raise VideoError(f"{f}: unreadable image")
    return resize_max_side(cv2.cvtColor(img, cv2.COLOR_BGR2RGB), max_side)


class FactsCache(Protocol):
    """Where a decoded content's facts (frame count, height, width) are kept, by its content digest."""

    def get(self, content_hash: str) -> dict[str, int] | None: ...
    def put(self, content_hash: str, facts: dict[str, int]) -> None: ...


class VideoPool:
    """One :class:`Video` per path for a run; releases the least recently used ones past ``max_bytes``
    (``video.max_bytes``, per process), never the two last used (a case's generated and reference video)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, facts: FactsCache | None = None, *,
                 max_pixels: int = DEFAULT_MAX_PIXELS, max_frames: int = DEFAULT_MAX_FRAMES):
        """``max_pixels`` / ``max_frames`` / ``max_bytes``: limits every :class:`Video` checks before decoding;
        ``facts``: where a decoded content's frame count and size are kept (the engine's cache)."""
        self.max_bytes = max_bytes
        self.facts_cache = facts
        self.max_pixels = int(max_pixels)
        self.max_frames = int(max_frames)
        self._videos: dict[Path, Video] = {}
        self._lru: OrderedDict[Path, Video] = OrderedDict()
        self.decode_counts: dict[str, int] = {}

    def get(self, path: Path | str, *, fps: float | None = None) -> Video:
        return self.adopt(Path(path).resolve(), fps, None)

    def adopt(self, resolved: Path, fps: float | None, content_hash: str | None) -> Video:
        """The pool's video for a path already resolved (``content_hash``: None, or its content's digest)."""
        v = self._videos.get(resolved)
        if v is None:
            v = self._videos[resolved] = Video(resolved, fps=fps, pool=self, max_pixels=self.max_pixels,
                                               max_frames=self.max_frames, max_bytes=self.max_bytes)
            v._hash = content_hash
        return v

    def facts(self, video: Video) -> dict[str, int] | None:
        """Frame count and size of this content, if a previous run decoded it."""
        if self.facts_cache is None:
            return None
        try:
            d = self.facts_cache.get(video.content_hash())
            return {k: int(d[k]) for k in ("num_frames", "height", "width")} if d is not None else None
        except (KeyError, TypeError, ValueError):
            return None

    def remember(self, video: Video, facts: dict[str, int]) -> None:
        if self.facts_cache is not None:
            self.facts_cache.put(video.content_hash(), facts)

    @property
    def held_bytes(self) -> int:
        """Decoded frames (whole, resized, or read one by one) the pool's videos hold now."""
        return sum(v.nbytes for v in self._lru.values())

    def _decoded(self, video: Video) -> None:
        self.decode_counts[str(video.path)] = self.decode_counts.get(str(video.path), 0) + 1

    def _grew(self, video: Video) -> None:
        """``video`` was used and may hold more: it becomes the most recent; older ones go past the budget."""
        self._lru[video.path] = video
        self._lru.move_to_end(video.path)
        total = self.held_bytes
        while self.max_bytes > 0 and total > self.max_bytes and len(self._lru) > 2:
            old = next(iter(self._lru.values()))
            total -= old.nbytes
            old.release()  # leaves the LRU
