#!/usr/bin/env python3
"""Smoke test of the loopback OpenStack (tests/openstack/setup.sh), with openstacksdk.

Reads $OS_STATE_DIR/cpi-openstack.json (or the path given as argv[1]) and, as the test user:
token; a port with a fixed IP from the free range; a server on it from the seeded image
(ACTIVE); metadata; hard reboot; a volume; attach; detach; extend; snapshot; a floating IP
associated with the server's port; extend while attached (volume API 3.42); then deletes
everything; plus a server on the unschedulable flavor that must end in ERROR with a fault.
Prints each step's time. Exit status 0 when everything passed.

Run with an interpreter that has openstacksdk, e.g.
  python3 -m venv /tmp/os-venv && /tmp/os-venv/bin/pip install openstacksdk
  /tmp/os-venv/bin/python tests/openstack/smoke.py
"""
import contextlib
import ipaddress
import json
import os
import sys
import time
import uuid

import openstack

STATE = os.environ.get('OS_STATE_DIR', '/var/tmp/cpi-openstack')
TIMEOUT = 120
T0 = time.time()


@contextlib.contextmanager
def step(name):
    t = time.time()
    try:
        yield
    except Exception:
        print(f'{name:<44} FAILED after {time.time() - t:.2f}s', flush=True)
        raise
    print(f'{name:<44} {time.time() - t:6.2f}s', flush=True)


def poll(what, fn, timeout=TIMEOUT, interval=0.2):
    t = time.time()
    while True:
        v = fn()
        if v:
            return v
        if time.time() - t > timeout:
            raise RuntimeError(f'timed out waiting for {what}')
        time.sleep(interval)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(STATE, 'cpi-openstack.json')
    with open(path) as f:
        cfg = json.load(f)
    conn = openstack.connect(
        auth_url=cfg['auth_url'], username=cfg['username'], password=cfg['password'],
        project_name=cfg['project_name'], user_domain_name=cfg['user_domain_name'],
        project_domain_name=cfg['project_domain_name'], region_name=cfg['region'],
        interface=cfg['interface'])
    tag = 'smoke-' + uuid.uuid4().hex[:6]
    cleanup = []   # (name, fn) run in reverse on the way out

    try:
        with step('token'):
            token = conn.authorize()
            assert token

        with step('port with a fixed IP (free range)'):
            lo = ipaddress.ip_address(cfg['free_ip_range']['start'])
            hi = ipaddress.ip_address(cfg['free_ip_range']['end'])
            used = {ip['ip_address'] for p in conn.network.ports(network_id=cfg['network']['id'])
                    for ip in p.fixed_ips}
            ip = next(str(lo + i) for i in range(int(hi) - int(lo) + 1)
                      if str(lo + i) not in used)
            port = conn.network.create_port(
                name=tag, network_id=cfg['network']['id'],
                fixed_ips=[{'subnet_id': cfg['subnet']['id'], 'ip_address': ip}],
                security_groups=[cfg['security_groups']['test']['id']])
            cleanup.append(('port', lambda: conn.network.delete_port(port, ignore_missing=True)))
            assert port.status == 'DOWN', port.status

        with step('server create -> ACTIVE'):
            flavor = cfg['flavors'][cfg['flavor']]['id']
            server = conn.compute.create_server(
                name=tag, image_id=cfg['image']['id'], flavor_id=flavor,
                networks=[{'port': port.id}], key_name=cfg['keypair']['name'],
                metadata={'director': 'smoke'})
            cleanup.append(('server', lambda: delete_server(conn, server.id)))
            server = conn.compute.wait_for_server(server, status='ACTIVE', wait=TIMEOUT,
                                                  interval=0.5)
            addrs = [a['addr'] for n in server.addresses.values() for a in n]
            assert ip in addrs, server.addresses

        with step('port bound and ACTIVE'):
            port = poll('port ACTIVE', lambda: (lambda p: p if p.status == 'ACTIVE' else None)(
                conn.network.get_port(port.id)), timeout=30)
            assert port.device_id == server.id

        with step('set metadata'):
            conn.compute.set_server_metadata(server, job='smoke', index='0')
            md = conn.compute.get_server_metadata(server).metadata
            assert md.get('job') == 'smoke' and md.get('director') == 'smoke', md

        with step('reboot (HARD) -> ACTIVE'):
            conn.compute.reboot_server(server, 'HARD')
            # wait on freshly fetched objects: the old one is already ACTIVE
            poll('server ACTIVE after reboot', lambda: (lambda s: s.status == 'ACTIVE' and
                 s.task_state is None)(conn.compute.get_server(server.id)), timeout=TIMEOUT)

        with step('volume create -> available'):
            vol = conn.block_storage.create_volume(size=1, name=tag,
                                                   volume_type=cfg['volume_type']['name'])
            cleanup.append(('volume', lambda: delete_volume(conn, vol.id)))
            vol = conn.block_storage.wait_for_status(vol, 'available', failures=['error'],
                                                     interval=0.3, wait=TIMEOUT)

        with step('attach -> in-use'):
            att = conn.compute.create_volume_attachment(server, volume_id=vol.id)
            vol = wait_volume(conn, vol.id, 'in-use')
            print(f'    device={att.device}')

        with step('detach -> available'):
            conn.compute.delete_volume_attachment(server, vol.id)
            vol = wait_volume(conn, vol.id, 'available')

        with step('extend 1 -> 2 GiB'):
            conn.block_storage.extend_volume(vol, 2)
            vol = poll('extended', lambda: (lambda v: v if v.status == 'available' and v.size == 2
                                            else None)(conn.block_storage.get_volume(vol.id)))

        with step('snapshot -> available'):
            snap = conn.block_storage.create_snapshot(volume_id=vol.id, name=tag)
            cleanup.append(('snapshot', lambda: delete_snapshot(conn, snap.id)))
            conn.block_storage.wait_for_status(snap, 'available', failures=['error'],
                                               interval=0.3, wait=TIMEOUT)

        with step('floating IP create + associate'):
            fip = conn.network.create_ip(floating_network_id=cfg['external_network']['id'],
                                         description=tag)
            cleanup.append(('floating ip', lambda: conn.network.delete_ip(fip, ignore_missing=True)))
            fip = conn.network.update_ip(fip, port_id=port.id, fixed_ip_address=ip)
            assert fip.port_id == port.id and fip.fixed_ip_address == ip, fip
            print(f'    {fip.floating_ip_address} -> {ip} (status {fip.status})')

        with step('floating IP visible in server addresses'):
            poll('floating ip in addresses', lambda: any(
                a['addr'] == fip.floating_ip_address
                for n in conn.compute.get_server(server.id).addresses.values() for a in n),
                timeout=30)

        with step('attach again, extend in-use (vol API 3.42)'):
            conn.compute.create_volume_attachment(server, volume_id=vol.id)
            wait_volume(conn, vol.id, 'in-use')
            r = conn.block_storage.post(f'/volumes/{vol.id}/action',
                                        json={'os-extend': {'new_size': 3}},
                                        microversion='3.42')
            assert r.status_code == 202, (r.status_code, r.text)
            poll('extended in-use', lambda: (lambda v: v if v.status == 'in-use' and v.size == 3
                                             else None)(conn.block_storage.get_volume(vol.id)))
            conn.compute.delete_volume_attachment(server, vol.id)
            wait_volume(conn, vol.id, 'available')

        with step('unschedulable flavor -> ERROR + fault'):
            big = conn.compute.create_server(
                name=tag + '-big', image_id=cfg['image']['id'],
                flavor_id=cfg['flavors'][cfg['flavor_unschedulable']]['id'],
                networks=[{'uuid': cfg['network']['id']}])
            cleanup.append(('big server', lambda: delete_server(conn, big.id)))
            big = poll('server ERROR', lambda: (lambda s: s if s.status == 'ERROR' else None)(
                conn.compute.get_server(big.id)), timeout=TIMEOUT)
            assert big.fault and big.fault.get('message'), big.fault
            print(f'    fault: {big.fault.get("code")} {big.fault.get("message")}')

        with step('delete everything'):
            while cleanup:
                name, fn = cleanup.pop()
                fn()
            assert conn.network.find_port(port.id, ignore_missing=True) is None
            assert conn.compute.find_server(server.id, ignore_missing=True) is None
            assert conn.block_storage.find_volume(vol.id, ignore_missing=True) is None
    finally:
        for name, fn in reversed(cleanup):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - best effort on failure paths
                print(f'cleanup of {name} failed: {e}', file=sys.stderr)
    print(f'{"TOTAL":<44} {time.time() - T0:6.2f}s')
    print('smoke: 1 passed, 0 failed')


def wait_volume(conn, vid, status):
    return poll(f'volume {status}', lambda: (lambda v: v if v.status == status else None)(
        conn.block_storage.get_volume(vid)), interval=0.2)


def delete_server(conn, sid):
    s = conn.compute.find_server(sid, ignore_missing=True)
    if s is None:
        return
    conn.compute.delete_server(s, ignore_missing=True)
    conn.compute.wait_for_delete(s, interval=0.3, wait=TIMEOUT)


def delete_volume(conn, vid):
    v = conn.block_storage.find_volume(vid, ignore_missing=True)
    if v is None:
        return
    conn.block_storage.delete_volume(v, ignore_missing=True)
    conn.block_storage.wait_for_delete(v, interval=0.3, wait=TIMEOUT)


def delete_snapshot(conn, sid):
    s = conn.block_storage.find_snapshot(sid, ignore_missing=True)
    if s is None:
        return
    conn.block_storage.delete_snapshot(s, ignore_missing=True)
    conn.block_storage.wait_for_delete(s, interval=0.3, wait=TIMEOUT)


if __name__ == '__main__':
    main()
