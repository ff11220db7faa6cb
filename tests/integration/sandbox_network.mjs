// --sandbox-network none: agents of local sandboxes get a network namespace
// with loopback only. Their runner still links (it dials from its own
// namespace, which has the host's network), but an agent can reach neither
// airlockd on 127.0.0.1 nor anything else; with the default (host), the
// same probe reaches airlockd, so the test can tell the two apart.
import path from 'node:path';
import { run, check, tmpdir } from '../interop/harness.mjs';
import { addUser, startAirlockd, api, attach, addLocalSandbox } from '../interop/airlockd.mjs';

async function probe(port, key) {
  const script = `cat /proc/net/dev | grep -c ':'; exec 3<>/dev/tcp/127.0.0.1/${port} && echo REACHED || echo UNREACHABLE`;
  const r = await api(port, 'POST', '/v1/terminals', key, { sandbox: 'box', argv: ['bash', '-c', script], mode: 'pipes' });
  const a = await attach(port, r.json.id, key);
  await a.ch.waitExit(20000);
  return Buffer.concat(a.ch.out).toString();
}

await run('sandbox_network', async () => {
  for (const mode of ['host', 'none']) {
    const dir = path.join(tmpdir(`net-${mode}`), 'data');
    const admin = addUser(dir, 'ada', 'admin');
    const d = await startAirlockd({ dir, args: ['--sandbox-network', mode] });
    const sb = await addLocalSandbox(d.port, admin);
    check(sb.link_up, `${mode}: the runner links`);
    const out = await probe(d.port, admin);
    if (mode === 'none') {
      check(/UNREACHABLE/.test(out) && /^1$/m.test(out), `none: the agent sees loopback only and cannot reach airlockd (${out.trim().replace(/\n/g, ' | ')})`);
    } else {
      check(/REACHED/.test(out), `host: the same probe reaches airlockd (${out.trim().replace(/\n/g, ' | ')})`);
    }
    await d.stop();
  }
});
