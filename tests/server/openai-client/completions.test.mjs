// The official openai npm client (pinned in package-lock.json) against a running gkq server's /v1/completions,
// non-streaming and streaming. GKQ_URL (http://127.0.0.1:PORT) and GKQ_MODEL come from the test that starts the
// server (tests/server/test_openai_client.cpp); run with `node --test`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';

const baseURL = `${process.env.GKQ_URL}/v1`;
const model = process.env.GKQ_MODEL;
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 30000 });

test('models.list names the served model', async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    assert.deepEqual(ids, [model]);
});

test('completions.create, not streamed', async () => {
    const c = await client.completions.create({ model, prompt: 'ab cd', max_tokens: 6, temperature: 0 });
    assert.equal(c.object, 'text_completion');
    assert.equal(c.model, model);
    assert.equal(c.choices.length, 1);
    assert.equal(typeof c.choices[0].text, 'string');
    assert.ok(['stop', 'length'].includes(c.choices[0].finish_reason));
    assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + c.usage.completion_tokens);
    assert.ok(c.usage.completion_tokens <= 6);
    if (process.env.GKQ_EXPECTED_TEXT !== undefined) assert.equal(c.choices[0].text, process.env.GKQ_EXPECTED_TEXT);
});

test('completions.create, streamed: the same text as the non-streamed call', async () => {
    const whole = await client.completions.create({ model, prompt: 'ab cd', max_tokens: 6, temperature: 0 });
    const stream = await client.completions.create({ model, prompt: 'ab cd', max_tokens: 6, temperature: 0, stream: true });
    let text = '';
    let finish = null;
    let chunks = 0;
    for await (const chunk of stream) {
        chunks++;
        text += chunk.choices[0].text;
        if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    }
    assert.ok(chunks >= 2);
    assert.equal(text, whole.choices[0].text);
    assert.equal(finish, whole.choices[0].finish_reason);
});

test('errors arrive as OpenAI API errors', async () => {
    await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: 'ab', max_tokens: 2 }), (e) => {
        assert.ok(e instanceof OpenAI.NotFoundError);
        assert.equal(e.status, 404);
        assert.equal(e.code, 'model_not_found');
        return true;
    });
    await assert.rejects(client.completions.create({ model, prompt: 'ab', max_tokens: 0 }), (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError);
        assert.equal(e.param, 'max_tokens');
        return true;
    });
});
