"""The host model: one SGLang server's desired state, computed from the inventory alone (no I/O).

playbooks/prelude.yml sets it once per host, as `sglang_host`, before every playbook's own plays, and
the roles take their inputs from it (sglang_service_args, sglang_audit_args, ... default to
sglang_host.args). It is the one place where the inventory's arguments are merged (the fleet's
sglang_args_common, the host's sglang_args over it) and where the flags a multi-node server or a PD
pair derives are added to them: no play rewrites an inventory variable with set_fact.

    name            the inventory name
    version         sglang_version
    env_root        the folder of the host's SGLang venvs (ml_env_root, else sglang_env_root)
    venv            the venv of `version` (ml_env builds it) and venv_marker, the lock ml_env leaves in it
    lock_file       the lock ml_env builds that venv from (<env_root>/locks/sglang-<version>-<profile>.txt)
    service         the systemd service sglang_service installs: name, unit_file, env_file, entrypoint
                    (what the launcher starts), launcher (sglang_common's, the unit's ExecStart) and
                    environment (its non-secret sglang_service_environment)
    model           the model revision it serves (sglang_model, module_utils/model/spec.py parse: kind, repo
                    or source, revision, pinned, files, name, root, path), {} when the inventory sets
                    sglang_args.model_path itself (the model is then the user's to place)
    inventory_args  the arguments as the inventory types them (the merge)
    args            inventory_args with the derived flags (what the server runs with): model_path is
                    model.path when sglang_model is set
    argv            args as SGLang's command line (None when a value cannot be one: the checks say why)
    device          "cpu" when the merged arguments say `device: cpu` (a server without GPUs: no GPU
                    facts, no GPU checks, no roofline), else "cuda" (module_utils/host/args.py device_of)
    url             where the server answers on the host itself
    multinode       the node's place in its multi-node server (multinode.py plan_of:
                    group, members, rank0, node_rank, nnodes, args); {} for a server of one host
    pd              the server's side of its PD pair (pd.py plan_of: role, prefill_group,
                    decode_group, bootstrap_port, args); {} outside a pair
    problems        what is wrong with its sglang_model, multi-node group or PD pair (the prelude refuses the
                    host), and replicas behind one router declared with different model revisions
    serves_api      false on the ranks of a multi-node server other than 0 (they serve health alone)

plugins/filter/sglang_host.py offers host_model and host_variant to the playbooks as the filters
sglang_host_model and sglang_host_variant. Controller only; stdlib only.
"""

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.host import args as sglang_args
from ansible_collections.sglang.fleet.plugins.module_utils.host import multinode, pd
from ansible_collections.sglang.fleet.plugins.module_utils.model import spec as model_spec
from ansible_collections.sglang.fleet.plugins.module_utils.transport.observe import VENV_MARKER

# The roles' defaults for what the inventory may leave unset (tests/unit/test_sglang_host.py checks
# that they agree): sglang_service_name, sglang_service_entrypoint, ml_env_profile.
DEFAULT_SERVICE, DEFAULT_ENTRYPOINT, DEFAULT_PROFILE = "sglang", "sglang.launch_server", "full"
# Where sglang_common installs the launcher every unit runs (roles/sglang_common/tasks/launcher.yml).
LAUNCHER = "/usr/local/lib/sglang-fleet/sglang_launch.py"


class HostModelError(SglangFleetError, ValueError):
    """A host model that cannot be computed (arguments that are no mapping) or a variant refused."""


def host_model(me, hostvars, groups, play_hosts_all):
    """`me`'s host model (see the module's docstring); `play_hosts_all`: the play's hosts, for the
    multi-node check that every node of a server is in the play."""
    hv = hostvars[me]
    try:
        inventory_args = sglang_args.inventory_args(hv)
        node = multinode.plan_of(me, hostvars, groups, play_hosts_all)
        side = pd.plan_of(me, hostvars, groups)
    except sglang_args.ArgsError as exc:  # sglang_args (this host's or a peer's) that is no mapping
        raise HostModelError(f"{me}: {exc}") from exc
    model, model_problems = _model(me, hv, inventory_args, hostvars, groups)
    derived = {"model_path": model["path"]} if model else {}
    args = {**inventory_args, **derived, **node.get("args", {}), **side.get("args", {})}
    try:
        argv = sglang_args.to_argv(args)
    except sglang_args.ArgsError:
        argv = None  # a value no command line can hold: sglang_service's checks refuse it, with its name
    env_root = hv.get("ml_env_root") or hv.get("sglang_env_root")
    version = hv.get("sglang_version")
    venv = f"{env_root}/sglang-{version}"
    service = hv.get("sglang_service_name") or DEFAULT_SERVICE
    return {
        "name": me,
        "version": version,
        "env_root": env_root,
        "venv": venv,
        "venv_marker": f"{venv}/{VENV_MARKER}",
        "lock_file": f"{env_root}/locks/sglang-{version}-{hv.get('ml_env_profile') or DEFAULT_PROFILE}.txt",
        "service": {
            "name": service,
            "unit_file": f"/etc/systemd/system/{service}.service",
            "env_file": f"/etc/sglang/{service}.env",
            "entrypoint": hv.get("sglang_service_entrypoint") or DEFAULT_ENTRYPOINT,
            "environment": dict(hv.get("sglang_service_environment") or {}),
            "launcher": LAUNCHER,
        },
        "model": model,
        "inventory_args": inventory_args,
        "args": args,
        "argv": argv,
        "device": sglang_args.device_of(args),
        "url": sglang_args.local_url(args),
        "multinode": node if node.get("group") else {},
        "pd": side if side.get("role") else {},
        "problems": model_problems + node["problems"] + side["problems"],
        "serves_api": node.get("node_rank", 0) == 0,
    }


def _model(me, hv, inventory_args, hostvars, groups):
    """(the parsed sglang_model or {}, problems): a bad declaration, a model_path that says otherwise,
    or a replica behind the same router (sglang_router_host) declared with another revision."""
    declared = hv.get("sglang_model")
    if not declared:
        return {}, []
    try:
        model = model_spec.parse(declared, hv.get("sglang_model_root"))
    except model_spec.ModelSpecError as exc:
        return {}, [str(exc)]
    problems = []
    path = inventory_args.get("model_path")
    if path and path != model["path"]:
        problems.append(f"sglang_args.model_path {path} disagrees with sglang_model, which is staged to {model['path']}: "
                        "remove model_path (sglang_model sets it)")
    router = hv.get("sglang_router_host")
    if router:
        for peer in sorted(groups.get("sglang_servers", [])):
            other = hostvars[peer]
            if peer == me or other.get("sglang_router_host") != router:
                continue
            theirs = other.get("sglang_model") or {}
            if {k: theirs.get(k) for k in ("repo", "source", "revision")} != \
                    {k: declared.get(k) for k in ("repo", "source", "revision")}:
                problems.append(f"{peer}, another replica behind router {router}, serves "
                                f"{model_spec.describe(theirs) or 'a model_path of its own'}, this host "
                                f"{model_spec.describe(model)}: give the replicas of one router the same sglang_model")
                break
    return model, problems


def host_variant(model, version, args):
    """`model` (a single server's host model) with another SGLang `version` and `args` (the merged
    arguments, as a release record keeps them): what regression.yml runs a step with. Its venv and
    lock follow the version; a multi-node server or a PD side has derived flags no step may change,
    so it is refused."""
    if model.get("multinode") or model.get("pd"):
        raise HostModelError(f"{model.get('name')}: regression.yml and tune.yml measure a server of one host; this one is "
                             "part of a multi-node server or a PD pair")
    old = f"sglang-{model['version']}-"
    lock_name = model["lock_file"].rsplit("/", 1)[-1]
    profile = lock_name[len(old):-len(".txt")] if lock_name.startswith(old) else DEFAULT_PROFILE
    try:
        argv = sglang_args.to_argv(args)
    except sglang_args.ArgsError:
        argv = None
    venv = f"{model['env_root']}/sglang-{version}"
    return {**model, "version": str(version), "venv": venv, "venv_marker": f"{venv}/{VENV_MARKER}",
            "lock_file": f"{model['env_root']}/locks/sglang-{version}-{profile}.txt",
            "inventory_args": dict(args), "args": dict(args), "argv": argv,
            "device": sglang_args.device_of(args), "url": sglang_args.local_url(args)}
