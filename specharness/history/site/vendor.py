"""Make ASV's published site work offline: ASV's pages load jQuery, flot, bootstrap and friends from CDNs, so on a
machine without internet the site shows only "Can not determine continental origin of swallow". This fetches the
same libraries by name from the npm registry (``npm pack``, cached) into ``html/vendor/`` and points the pages there.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from specharness._errors import ConfigError
from specharness.engines.model import cache_dir

__all__ = ["VENDORED", "vendor_site"]

# CDN file name -> (npm package spec, path inside the package)
VENDORED: dict[str, tuple[str, str]] = {
    "jquery-3.3.1.min.js": ("jquery@3.3.1", "dist/jquery.min.js"),
    "jquery.flot.min.js": ("flot@0.8.3", "jquery.flot.js"),
    "jquery.flot.time.min.js": ("flot@0.8.3", "jquery.flot.time.js"),
    "jquery.flot.selection.min.js": ("flot@0.8.3", "jquery.flot.selection.js"),
    "jquery.flot.categories.min.js": ("flot@0.8.3", "jquery.flot.categories.js"),
    "jquery.flot.orderBars.js": ("flot-orderbars@1.0.0", "js/jquery.flot.orderBars.js"),
    "stupidtable.min.js": ("stupid-table-plugin@1.1.3", "stupidtable.min.js"),
    "md5.min.js": ("blueimp-md5@2.19.0", "js/md5.min.js"),
    "bootstrap.min.js": ("bootstrap@3.1.1", "dist/js/bootstrap.min.js"),
    "bootstrap.min.css": ("bootstrap@3.1.1", "dist/css/bootstrap.min.css"),
}
_TAG = re.compile(r'<(script|link)\b[^>]*?(?:src|href)="(https?://[^"]+)"[^>]*>')


def _fetch(dest: Path) -> None:
    """Fill ``dest`` with every vendored file, using the cache and ``npm pack`` for what is missing."""
    cache = cache_dir() / "site-vendor"
    cache.mkdir(parents=True, exist_ok=True)
    for name, (spec, inner) in VENDORED.items():
        cached = cache / name
        if not cached.is_file():
            if shutil.which("npm") is None:
                raise ConfigError(
                    "npm is needed once to fetch the site's JavaScript libraries; install Node.js/npm "
                    "or pass --no-vendor"
                )
            with tempfile.TemporaryDirectory() as tmp:
                packed = subprocess.run(
                    ["npm", "pack", "-q", spec], cwd=tmp, capture_output=True, text=True, timeout=300
                )
                tgz = next(Path(tmp).glob("*.tgz"), None)
                if packed.returncode != 0 or tgz is None:
                    raise ConfigError(f"npm pack {spec} failed: {packed.stderr.strip().splitlines()[-1:]}")
                with tarfile.open(tgz) as archive:
                    member = archive.extractfile(f"package/{inner}")
                    if member is None:
                        raise ConfigError(f"{spec} has no {inner}")
                    cached.write_bytes(member.read())
        shutil.copyfile(cached, dest / name)


def vendor_site(html_dir: Path) -> int:
    """Point every page's CDN scripts and styles at ``vendor/``; returns how many tags were rewritten."""
    vendor = html_dir / "vendor"
    vendor.mkdir(exist_ok=True)
    _fetch(vendor)
    rewritten = 0
    for page in html_dir.rglob("*.html"):
        text = page.read_text()
        prefix = "../" * (len(page.relative_to(html_dir).parts) - 1)

        def local(match: re.Match[str], prefix: str = prefix) -> str:
            nonlocal rewritten
            kind, url = match.group(1), match.group(2)
            name = url.rsplit("/", 1)[-1]
            if name not in VENDORED:
                return match.group(0)
            rewritten += 1
            if kind == "script":
                return f'<script src="{prefix}vendor/{name}" onerror="js_load_failure()">'
            return f'<link rel="stylesheet" href="{prefix}vendor/{name}">'

        new = _TAG.sub(local, text)
        if new != text:
            page.write_text(new)
    return rewritten
