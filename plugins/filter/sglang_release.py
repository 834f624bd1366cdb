"""Filters that show a host's release records (roles/sglang_release) as lines."""

from ansible_collections.sglang.fleet.plugins.module_utils.model.spec import describe as describe_model


def release_lines(releases, current=None, last_good=None):
    """One line per release, oldest first: id, status, markers, version, fingerprint, speed, who and when."""
    lines = []
    for rec in releases or []:
        marks = [name for name, rid in (("current", current), ("last known good", last_good)) if rid == rec.get("id")]
        verify = rec.get("verify") or {}
        speed = (verify.get("metrics") or {}).get("decode_tok_s@1")
        who = rec.get("controller") or {}
        line = (f"{rec.get('id')}  {rec.get('status')}{' (' + ', '.join(marks) + ')' if marks else ''}  "
                f"sglang {rec.get('version')}  fingerprint {rec.get('fingerprint')}  "
                f"{'model ' + describe_model(rec.get('model')) + '  ' if rec.get('model') else ''}"
                f"{f'{speed} tok/s single stream' if speed is not None else 'not verified'}  "
                f"recorded {rec.get('recorded_at')} by {who.get('user', '?')} at commit {who.get('commit', '?')}")
        if rec.get("failure"):
            line += f"  failed: {str(rec['failure']).splitlines()[0][:200]}"
        lines.append(line)
    return lines or ["no release recorded on this host yet (deploy.yml records one)"]


class FilterModule:
    def filters(self):
        return {"sglang_release_lines": release_lines}
