// @ts-check
// An AI SDK agent in code mode: the model writes one program that calls the
// tools, and the gateway runs it. The SDK's mock model stands in for a real
// one, so this runs without a key; swap in any provider's model.
//
//   make run
//   node examples/ai-agent.mjs
import { generateText, stepCountIs, tool } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
import { z } from 'zod'
import { RemoteExecutor } from '@codemode-gateway/client'
import { createCodeTool } from '@codemode-gateway/client/ai'

const url = process.env.CODEMODE_URL ?? 'ws://127.0.0.1:8080/v1/executor'
const apiKey = process.env.CODEMODE_KEY ?? 'cmk_demo_local_only_never_deploy_this_key'

const executor = await RemoteExecutor.connect({ url, apiKey })
try {
  const tools = {
    getWeather: tool({
      description: 'The current temperature of a city, in °C',
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => ({ city, celsius: { Oslo: 4, Lisbon: 19 }[city] ?? 12 }),
    }),
  }
  const codemode = createCodeTool({ tools, executor, timeout: 10000 })

  /** @type {import('@ai-sdk/provider').LanguageModelV3Usage} */
  const usage = { inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 0, text: 0, reasoning: 0 } }
  // What a model would answer: first a program (markdown and TypeScript
  // included, as models write them), then a sentence about its result.
  const model = new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const answered = prompt.some((m) => m.role === 'tool')
      return answered
        ? { content: [{ type: 'text', text: 'Lisbon is warmer.' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] }
        : {
            content: [{
              type: 'tool-call', toolCallId: 'call-1', toolName: 'codemode',
              input: JSON.stringify({ code: "```ts\nconst [a, b] = await Promise.all(['Oslo', 'Lisbon'].map((city: string) => codemode.getWeather({ city })))\na.celsius > b.celsius ? a.city : b.city\n```" }),
            }],
            finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [],
          }
    },
  })

  const { text, steps } = await generateText({ model, tools: { codemode }, prompt: 'Which is warmer, Oslo or Lisbon?', stopWhen: stepCountIs(3) })
  console.log(steps.flatMap((s) => s.toolResults).map((r) => r.output)) // [ { result: 'Lisbon', logs: [] } ]
  console.log(text)
} finally {
  await executor.dispose()
}
