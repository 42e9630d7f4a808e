#!/usr/bin/python3
"""Seed the loopback OpenStack for the CPI's tests (run by setup.sh with Debian's python3).

Idempotent: finds what exists, creates what is missing. Phases:
  keystone   services, endpoints, service users, the test project and user
  resources  flavors, image, keypair, networks, router, floating IP, security group,
             volume type; then writes $STATE/cpi-openstack.json
Only keystoneauth1 (a dependency of every service) is used: plain REST calls.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

AUTH_URL = 'http://127.0.0.1:5000/v3'
REGION = 'RegionOne'
DOMAIN = 'Default'

TEST_PROJECT = 'cpi'
TEST_USER = 'cpi'
TEST_PASSWORD = 'cpi-secret'          # throwaway: everything listens on 127.0.0.1 only
SERVICE_PROJECT = 'service'

# name -> (type, url)
SERVICES = {
    'glance': ('image', 'http://127.0.0.1:9292'),
    'placement': ('placement', 'http://127.0.0.1:8778'),
    'nova': ('compute', 'http://127.0.0.1:8774/v2.1'),
    'neutron': ('network', 'http://127.0.0.1:9696'),
    'cinderv3': ('volumev3', 'http://127.0.0.1:8776/v3/%(project_id)s'),
}
SERVICE_USERS = ['glance', 'placement', 'nova', 'neutron', 'cinder']

# name -> (vcpus, ram MiB, root disk GiB, ephemeral GiB)
FLAVORS = {
    'm1.tiny': (1, 512, 1, 0),
    'm1.small': (1, 2048, 10, 0),
    'm1.medium': (2, 4096, 20, 0),
    'm1.ephemeral': (1, 1024, 5, 3),     # ephemeral >= 2x RAM, as the OpenStack CPI wants
    'm1.nodisk': (1, 1024, 0, 0),         # root disk 0: the CPI needs root_disk.size
    # FakeDriver's host has 1000 vCPUs / 800000 MiB / 600000 GiB: this never fits, so the
    # scheduler fails and the server ends in ERROR with fault "No valid host was found."
    'm1.toobig': (4, 64 * 1024 * 1024, 1, 0),
}
TOO_BIG = 'm1.toobig'

IMAGE_NAME = 'bosh-light-stemcell'
KEYPAIR = 'cpi-key'
SECGROUP = 'cpi-sg'
NET, SUBNET = 'cpi-net', 'cpi-subnet'
CIDR, GATEWAY = '10.20.0.0/24', '10.20.0.1'
POOL = ('10.20.0.10', '10.20.0.99')           # neutron allocates from here
FREE_RANGE = ('10.20.0.100', '10.20.0.250')   # outside the pool: for manual networks
EXT_NET, EXT_SUBNET = 'cpi-ext-net', 'cpi-ext-subnet'
EXT_CIDR, EXT_GATEWAY, EXT_POOL = '172.24.4.0/24', '172.24.4.1', ('172.24.4.10', '172.24.4.250')
ROUTER = 'cpi-router'
FIP_DESCRIPTION = 'cpi-test-vip'
VOLUME_TYPE = 'cpi-fake'


def log(msg):
    print(f'{time.strftime("%H:%M:%S")} [seed] {msg}', file=sys.stderr, flush=True)


class Api:
    """A keystoneauth session bound to one identity, with per-service helpers."""

    def __init__(self, username, password, project):
        auth = v3.Password(auth_url=AUTH_URL, username=username, password=password,
                           project_name=project, user_domain_name=DOMAIN,
                           project_domain_name=DOMAIN)
        self.sess = ks_session.Session(auth=auth)
        self.project_id = None

    def req(self, service, method, path, body=None, ok=(200, 201, 202, 204), headers=None,
            raw=None, **kw):
        filt = {'service_type': service, 'interface': 'public', 'region_name': REGION}
        if service == 'identity':
            filt = {'service_type': 'identity', 'interface': 'public'}
        hdrs = dict(headers or {})
        args = {}
        if raw is not None:
            args['data'] = raw
        elif body is not None:
            args['json'] = body
        r = self.sess.request(path, method, endpoint_filter=filt, headers=hdrs,
                              raise_exc=False, **args, **kw)
        if r.status_code not in ok:
            raise RuntimeError(f'{service} {method} {path} -> {r.status_code} {r.text[:500]}')
        if r.content and 'json' in r.headers.get('Content-Type', ''):
            return r.json()
        return None

    def get(self, service, path, **kw):
        return self.req(service, 'GET', path, **kw)

    def post(self, service, path, body, **kw):
        return self.req(service, 'POST', path, body, **kw)


def wait(what, fn, timeout=180, interval=0.5):
    t0 = time.time()
    while True:
        try:
            v = fn()
        except (ks_exc.ConnectFailure, ks_exc.EndpointNotFound, RuntimeError) as e:
            v = None
            last = e
        else:
            last = None
        if v:
            return v
        if time.time() - t0 > timeout:
            raise RuntimeError(f'timed out waiting for {what} ({last})')
        time.sleep(interval)


def one(items, what):
    if len(items) > 1:
        raise RuntimeError(f'more than one {what}: {items}')
    return items[0] if items else None


# --------------------------------------------------------------------------- keystone
def seed_keystone(admin, svc_password):
    def find(path, key, **params):
        q = '&'.join(f'{k}={v}' for k, v in params.items())
        return one(admin.get('identity', f'{path}?{q}')[key], path)

    def ensure(path, key, name_attrs, attrs=None):
        obj = find(path, key, **name_attrs)
        if obj is None:
            body = dict(name_attrs)
            body.update(attrs or {})
            obj = admin.post('identity', path, {key[:-1]: body})[key[:-1]]
            log(f'created {key[:-1]} {name_attrs}')
        return obj

    default_domain = 'default'
    roles = {r: ensure('/roles', 'roles', {'name': r})['id']
             for r in ('admin', 'member', 'reader', 'service')}

    for name, (stype, url) in SERVICES.items():
        svc = find('/services', 'services', type=stype)
        if svc is None:
            svc = admin.post('identity', '/services',
                             {'service': {'name': name, 'type': stype, 'enabled': True}})['service']
            log(f'created service {name}')
        eps = admin.get('identity', f'/endpoints?service_id={svc["id"]}')['endpoints']
        have = {e['interface']: e for e in eps}
        for iface in ('public', 'internal', 'admin'):
            if iface in have and have[iface]['url'] == url:
                continue
            if iface in have:
                admin.req('identity', 'PATCH', f'/endpoints/{have[iface]["id"]}',
                          {'endpoint': {'url': url}})
            else:
                admin.post('identity', '/endpoints', {'endpoint': {
                    'service_id': svc['id'], 'interface': iface, 'url': url,
                    'region_id': REGION}})

    def ensure_user(name, password, project_id, role_names):
        user = find('/users', 'users', name=name, domain_id=default_domain)
        if user is None:
            user = admin.post('identity', '/users', {'user': {
                'name': name, 'password': password, 'domain_id': default_domain,
                'default_project_id': project_id}})['user']
            log(f'created user {name}')
        for r in role_names:
            admin.req('identity', 'PUT', f'/projects/{project_id}/users/{user["id"]}/roles/{roles[r]}',
                      ok=(200, 201, 204))
        return user

    service_project = ensure('/projects', 'projects',
                             {'name': SERVICE_PROJECT, 'domain_id': default_domain})
    for u in SERVICE_USERS:
        ensure_user(u, svc_password, service_project['id'], ['admin', 'service'])
    project = ensure('/projects', 'projects', {'name': TEST_PROJECT, 'domain_id': default_domain},
                     {'description': 'BOSH CPI tests'})
    ensure_user(TEST_USER, TEST_PASSWORD, project['id'], ['member'])


# --------------------------------------------------------------------------- resources
def ensure_compute_host(admin, state_dir, nova_manage):
    # os-hypervisors lists a compute node only once its host is mapped into cell1, so map it
    # (discover_hosts --by-service) as soon as the nova-compute service has registered; the
    # scheduler would do it too, but only every discover_hosts_in_cells_interval.
    wait('the nova-compute service', lambda: [
        s for s in admin.get('compute', '/os-services?binary=nova-compute')['services']
        if s['state'] == 'up'], timeout=240)
    marker = os.path.join(state_dir, 'markers', 'nova-discover-hosts')
    if not os.path.exists(marker):
        log('mapping compute host into cell1 (discover_hosts)')
        subprocess.run([*nova_manage.split(), 'cell_v2', 'discover_hosts', '--by-service'],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        open(marker, 'w').close()
    hyp = wait('the fake compute host up', lambda: [
        h for h in admin.get('compute', '/os-hypervisors/detail')['hypervisors']
        if h.get('state') == 'up'], timeout=240)
    return hyp[0]


def purge_stale_servers(admin):
    """FakeDriver keeps guests in memory: after a nova-compute restart, old servers are ghosts."""
    servers = admin.get('compute', '/servers?all_tenants=1')['servers']
    if not servers:
        return
    log(f'deleting {len(servers)} server(s) left from before nova-compute restarted')
    for s in servers:
        admin.req('compute', 'DELETE', f'/servers/{s["id"]}', ok=(204, 404))
    wait('stale servers to go', lambda: not admin.get('compute', '/servers?all_tenants=1')['servers']
         or None, timeout=120)


def ensure_flavors(admin):
    have = {f['name']: f for f in admin.get('compute', '/flavors/detail?is_public=None')['flavors']}
    out = {}
    for name, (vcpus, ram, disk, eph) in FLAVORS.items():
        f = have.get(name)
        if f is None:
            f = admin.post('compute', '/flavors', {'flavor': {
                'name': name, 'vcpus': vcpus, 'ram': ram, 'disk': disk,
                'OS-FLV-EXT-DATA:ephemeral': eph, 'os-flavor-access:is_public': True}})['flavor']
            log(f'created flavor {name}')
        out[name] = {'id': f['id'], 'vcpus': f['vcpus'], 'ram': f['ram'], 'disk': f['disk'],
                     'ephemeral': f.get('OS-FLV-EXT-DATA:ephemeral', 0)}
    return out


def ensure_image(admin):
    imgs = admin.get('image', f'/v2/images?name={IMAGE_NAME}')['images']
    for img in imgs:
        if img['status'] == 'active':
            return img
        admin.req('image', 'DELETE', f'/v2/images/{img["id"]}', ok=(204, 404))
    img = admin.post('image', '/v2/images', {
        'name': IMAGE_NAME, 'disk_format': 'raw', 'container_format': 'bare',
        'visibility': 'public', 'min_disk': 0, 'min_ram': 0,
        'os_distro': 'ubuntu', 'hypervisor_type': 'fake', 'architecture': 'x86_64',
        'version': '1.0'})
    admin.req('image', 'PUT', f'/v2/images/{img["id"]}/file', raw=b'\0' * (1024 * 1024),
              headers={'Content-Type': 'application/octet-stream'})
    img = wait('image active', lambda: (lambda i: i if i['status'] == 'active' else None)(
        admin.get('image', f'/v2/images/{img["id"]}')))
    log(f'created image {IMAGE_NAME}')
    return img


def ensure_keypair(user, state_dir):
    key_file = os.path.join(state_dir, 'seed', KEYPAIR)
    kp = user.req('compute', 'GET', f'/os-keypairs/{KEYPAIR}', ok=(200, 404))
    if kp and os.path.exists(key_file):
        return kp['keypair'], key_file
    if kp:
        user.req('compute', 'DELETE', f'/os-keypairs/{KEYPAIR}', ok=(202, 204, 404))
    for f in (key_file, key_file + '.pub'):
        if os.path.exists(f):
            os.unlink(f)
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', KEYPAIR, '-f', key_file],
                   check=True)
    with open(key_file + '.pub') as f:
        pub = f.read().strip()
    kp = user.post('compute', '/os-keypairs', {'keypair': {'name': KEYPAIR, 'public_key': pub}})
    log(f'created keypair {KEYPAIR}')
    return kp['keypair'], key_file


def find_net(api, path, key, **params):
    q = '&'.join(f'{k}={v}' for k, v in params.items())
    return one(api.get('network', f'/v2.0/{path}?{q}')[key], path)


def ensure_net(admin, path, key, find_attrs, attrs):
    obj = find_net(admin, path, key, **find_attrs)
    if obj is None:
        body = dict(find_attrs)
        body.update(attrs)
        obj = admin.post('network', f'/v2.0/{path}', {key[:-1]: body})[key[:-1]]
        log(f'created {key[:-1]} {find_attrs.get("name", find_attrs)}')
    return obj


def ensure_networks(admin, user, project_id):
    ext = ensure_net(admin, 'networks', 'networks', {'name': EXT_NET}, {
        'router:external': True, 'provider:network_type': 'flat',
        'provider:physical_network': 'extnet', 'shared': False})
    ext_sub = ensure_net(admin, 'subnets', 'subnets', {'name': EXT_SUBNET, 'network_id': ext['id']}, {
        'ip_version': 4, 'cidr': EXT_CIDR, 'gateway_ip': EXT_GATEWAY, 'enable_dhcp': False,
        'allocation_pools': [{'start': EXT_POOL[0], 'end': EXT_POOL[1]}]})
    net = ensure_net(admin, 'networks', 'networks', {'name': NET, 'project_id': project_id}, {})
    sub = ensure_net(admin, 'subnets', 'subnets', {'name': SUBNET, 'network_id': net['id']}, {
        'project_id': project_id, 'ip_version': 4, 'cidr': CIDR, 'gateway_ip': GATEWAY,
        'enable_dhcp': True, 'allocation_pools': [{'start': POOL[0], 'end': POOL[1]}]})
    router = ensure_net(admin, 'routers', 'routers', {'name': ROUTER, 'project_id': project_id}, {
        'external_gateway_info': {'network_id': ext['id']}})
    if not (router.get('external_gateway_info') or {}).get('network_id'):
        admin.req('network', 'PUT', f'/v2.0/routers/{router["id"]}',
                  {'router': {'external_gateway_info': {'network_id': ext['id']}}})
    ifaces = admin.get('network', f'/v2.0/ports?device_id={router["id"]}'
                                  '&device_owner=network:router_interface')['ports']
    if not any(ip['subnet_id'] == sub['id'] for p in ifaces for ip in p['fixed_ips']):
        admin.req('network', 'PUT', f'/v2.0/routers/{router["id"]}/add_router_interface',
                  {'subnet_id': sub['id']})
        log(f'attached {SUBNET} to {ROUTER}')
    router = admin.get('network', f'/v2.0/routers/{router["id"]}')['router']

    # the project's "default" security group appears on first listing by the project
    user.get('network', '/v2.0/security-groups?name=default')
    sg = find_net(user, 'security-groups', 'security_groups', name=SECGROUP)
    if sg is None:
        sg = user.post('network', '/v2.0/security-groups', {'security_group': {
            'name': SECGROUP, 'description': 'BOSH CPI tests: ssh, icmp, intra-group'}})['security_group']
        for rule in ({'protocol': 'tcp', 'port_range_min': 22, 'port_range_max': 22,
                      'remote_ip_prefix': '0.0.0.0/0'},
                     {'protocol': 'icmp', 'remote_ip_prefix': '0.0.0.0/0'},
                     {'remote_group_id': sg['id']}):
            rule.update({'direction': 'ingress', 'ethertype': 'IPv4',
                         'security_group_id': sg['id']})
            user.post('network', '/v2.0/security-group-rules', {'security_group_rule': rule})
        log(f'created security group {SECGROUP}')

    fip = one(user.get('network', f'/v2.0/floatingips?description={FIP_DESCRIPTION}'
                                  f'&floating_network_id={ext["id"]}')['floatingips'], 'floating ip')
    if fip is None:
        fip = user.post('network', '/v2.0/floatingips', {'floatingip': {
            'floating_network_id': ext['id'], 'description': FIP_DESCRIPTION}})['floatingip']
        log(f'allocated floating IP {fip["floating_ip_address"]}')
    return ext, ext_sub, net, sub, router, sg, fip


def ensure_volume_type(admin):
    types = admin.get('volumev3', '/types?is_public=None')['volume_types']
    vt = next((t for t in types if t['name'] == VOLUME_TYPE), None)
    if vt is None:
        vt = admin.post('volumev3', '/types', {'volume_type': {
            'name': VOLUME_TYPE, 'os-volume-type-access:is_public': True,
            'description': 'fake backend (cinder in-tree FakeLoggingVolumeDriver)',
            'extra_specs': {'volume_backend_name': 'fake'}}})['volume_type']
        log(f'created volume type {VOLUME_TYPE}')
    wait('cinder-volume up', lambda: [
        s for s in admin.get('volumev3', '/os-services?binary=cinder-volume')['services']
        if s['state'] == 'up'], timeout=180)
    return vt


def seed_resources(args, admin_password):
    admin = Api('admin', admin_password, 'admin')
    user = Api(TEST_USER, TEST_PASSWORD, TEST_PROJECT)
    project_id = user.sess.get_project_id()
    user_id = user.sess.get_user_id()

    hyp = ensure_compute_host(admin, args.state_dir, args.nova_manage)
    if args.purge_stale_servers:
        purge_stale_servers(admin)
    flavors = ensure_flavors(admin)
    image = ensure_image(admin)
    keypair, key_file = ensure_keypair(user, args.state_dir)
    ext, ext_sub, net, sub, router, sg, fip = ensure_networks(admin, user, project_id)
    vt = ensure_volume_type(admin)

    def endpoint(stype):
        return user.sess.get_endpoint(service_type=stype, interface='public', region_name=REGION)

    out = {
        'auth_url': AUTH_URL,
        'username': TEST_USER,
        'password': TEST_PASSWORD,
        'user_id': user_id,
        'project_name': TEST_PROJECT,
        'project_id': project_id,
        'user_domain_name': DOMAIN,
        'project_domain_name': DOMAIN,
        'domain': DOMAIN,
        'region': REGION,
        'interface': 'public',
        'user_roles': ['member', 'reader'],
        'admin': {'username': 'admin', 'password': admin_password, 'project_name': 'admin',
                  'user_domain_name': DOMAIN, 'project_domain_name': DOMAIN},
        'endpoints': {t: endpoint(t) for t in
                      ('identity', 'compute', 'image', 'network', 'volumev3', 'placement')},
        'availability_zone': 'nova',
        'compute_host': hyp.get('service', {}).get('host') or hyp.get('hypervisor_hostname'),
        'flavors': flavors,
        'flavor': 'm1.tiny',
        'flavor_unschedulable': TOO_BIG,
        'image': {'id': image['id'], 'name': image['name'], 'status': image['status'],
                  'disk_format': image['disk_format'], 'visibility': image['visibility']},
        'keypair': {'name': keypair['name'], 'private_key_file': key_file,
                    'fingerprint': keypair.get('fingerprint')},
        'network': {'id': net['id'], 'name': net['name']},
        'subnet': {'id': sub['id'], 'name': sub['name'], 'cidr': sub['cidr'],
                   'gateway_ip': sub['gateway_ip'], 'allocation_pools': sub['allocation_pools'],
                   'enable_dhcp': sub['enable_dhcp']},
        'free_ip_range': {'start': FREE_RANGE[0], 'end': FREE_RANGE[1],
                          'note': 'inside the subnet, outside its allocation pool: for '
                                  'manual-network fixed IPs'},
        'external_network': {'id': ext['id'], 'name': ext['name']},
        'external_subnet': {'id': ext_sub['id'], 'name': ext_sub['name'],
                            'cidr': ext_sub['cidr'],
                            'allocation_pools': ext_sub['allocation_pools']},
        'router': {'id': router['id'], 'name': router['name'],
                   'external_fixed_ips': (router.get('external_gateway_info') or {})
                   .get('external_fixed_ips')},
        'floating_ip': {'id': fip['id'], 'address': fip['floating_ip_address'],
                        'note': 'pre-allocated in the project, for vip networks'},
        'security_groups': {'default': 'default', 'test': {'id': sg['id'], 'name': sg['name']}},
        'volume_type': {'id': vt['id'], 'name': vt['name'], 'is_default': True},
        'state_dir': args.state_dir,
        'log_dir': os.path.join(args.state_dir, 'log'),
    }
    path = os.path.join(args.state_dir, 'cpi-openstack.json')
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(out, f, indent=2, sort_keys=False)
        f.write('\n')
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument('phase', choices=['keystone', 'resources'])
    p.add_argument('--state-dir', required=True)
    p.add_argument('--admin-password', required=True)
    p.add_argument('--service-password', default=None)
    p.add_argument('--nova-manage', default='nova-manage')
    p.add_argument('--purge-stale-servers', action='store_true')
    args = p.parse_args()
    if args.phase == 'keystone':
        seed_keystone(Api('admin', args.admin_password, 'admin'), args.service_password)
    else:
        seed_resources(args, args.admin_password)


if __name__ == '__main__':
    main()
