import { describe, expect, it } from 'vitest';
import { answerLinkTest, LinkTestRefused } from '../../workers/agent/link-test.js';
import { AgentRequestSchema, LINK_TEST_MAX_BYTES } from '../../workers/protocol/agent.js';

// The agent's half of a link test: a sink and a source of bounded size, pure data both ways.
describe('agent link-test', () => {
  it('counts the upload and answers the bytes asked, as base64', () => {
    const r = answerLinkTest('QUJD', 3000);
    expect(r.received).toBe(4);
    expect(Buffer.from(r.data, 'base64').length).toBe(3000);
    expect(answerLinkTest('', 0).data).toBe('');
    expect(Buffer.from(answerLinkTest('', LINK_TEST_MAX_BYTES).data, 'base64').length).toBe(LINK_TEST_MAX_BYTES);
  });

  it('refuses to answer more than one request may carry, saying the bound and what to do', () => {
    expect(() => answerLinkTest('', 64 << 20)).toThrow(LinkTestRefused);
    expect(() => answerLinkTest('', LINK_TEST_MAX_BYTES + 1)).toThrow(
      /more than the 524288 bytes an agent answers per request; send several/,
    );
  });

  it('the request schema bounds the upload and takes nothing but data', () => {
    const ok = { id: 1, method: 'link-test', data: 'A'.repeat(Math.ceil(LINK_TEST_MAX_BYTES / 3) * 4), reply_bytes: 0 };
    expect(AgentRequestSchema.safeParse(ok).success).toBe(true);
    expect(AgentRequestSchema.safeParse({ ...ok, data: `${ok.data}AAAA` }).success).toBe(false);
    expect(AgentRequestSchema.safeParse({ ...ok, command: 'ls' }).success).toBe(false);
    expect(AgentRequestSchema.safeParse({ ...ok, reply_bytes: -1 }).success).toBe(false);
  });
});
