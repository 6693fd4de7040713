// The AI SDK adapter driven through the real AI SDK (generateText with its
// mock language model) against the real gateway. client_test.go runs this
// file twice: with the package's own ai 6 under the Node.js of the machine,
// and with ai 7 under the Node.js 22 of test/ai7 (AI_SDK_MAJOR=7, its
// resolve hook making every import of ai load test/ai7's).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { generateText, stepCountIs, tool } from 'ai'
import * as aiTest from 'ai/test'
import aiPackage from 'ai/package.json' with { type: 'json' }
import { z } from 'zod'
import { createCodeTool } from '../dist/adapters/ai.js'
import { connectToNewGateway, stopGateway } from './gateway.mjs'

const major = Number(process.env.AI_SDK_MAJOR || 6)
// The SDK's own mock of the language model specification of each major.
const MockLanguageModel = { 6: aiTest.MockLanguageModelV3, 7: aiTest.MockLanguageModelV4 }[major]

let gw
let remote
before(async () => ({ gw, executor: remote } = await connectToNewGateway()))
after(() => stopGateway({ gw, executor: remote }))

test(`ai ${major}: the tests run against that major of the AI SDK`, () => {
  assert.equal(Number(aiPackage.version.split('.')[0]), major, `ai ${aiPackage.version} under Node.js ${process.version}`)
  assert.equal(typeof MockLanguageModel, 'function')
  if (major === 7) assert.equal(Number(process.versions.node.split('.')[0]), 22)
})

// How each major hands a context to the tools of one generateText call: v6
// one experimental_context for all, v7 a context per tool name.
const contextOption = (value) => (major === 6 ? { experimental_context: value } : { toolsContext: { codemode: value } })
const contextOf = (options) => (major === 6 ? options.experimental_context : options.context)

test(`ai ${major}: generateText with the mock model runs the model's code on the gateway through createCodeTool`, async () => {
  const asked = []
  const tools = {
    getWeather: tool({
      description: 'Weather of a city',
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }, options) => {
        asked.push([city, options.toolCallId, contextOf(options)])
        return { city, temp: city === 'Oslo' ? 21 : 30 }
      },
    }),
  }
  tools.dropTables = tool({ description: 'Needs a human', inputSchema: z.object({}), needsApproval: true, execute: async () => 'dropped' })
  const codeTool = createCodeTool({ tools, executor: remote })
  // The model writes TypeScript in a markdown fence, as statements.
  const modelCode = "```ts\nconst cities: string[] = ['Oslo', 'Rome']\nconst temps = []\nfor (const city of cities) temps.push((await codemode.getWeather({ city })).temp as number)\nconsole.log('temps', temps.join(','))\ntemps.reduce((a: number, b: number) => a + b, 0)\n```"
  const model = new MockLanguageModel({
    doGenerate: async ({ prompt }) => {
      const toolResult = prompt.flatMap((m) => (m.role === 'tool' ? m.content : [])).find((c) => c.type === 'tool-result')
      const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } }
      if (!toolResult) {
        return { content: [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'codemode', input: JSON.stringify({ code: modelCode }) }],
          finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] }
      }
      return { content: [{ type: 'text', text: `The sum is ${toolResult.output.value.result}.` }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] }
    },
  })
  const result = await generateText({ model, tools: { codemode: codeTool }, prompt: 'Add the temperatures of Oslo and Rome.', stopWhen: stepCountIs(3),
    ...contextOption({ user: 'ada' }) })
  assert.equal(result.text, 'The sum is 51.')
  // Each inner call has an id of its own and the code tool's context.
  assert.deepEqual(asked, [['Oslo', 'call-1.1', { user: 'ada' }], ['Rome', 'call-1.2', { user: 'ada' }]])
  const toolResults = result.steps.flatMap((s) => s.toolResults)
  assert.deepEqual(toolResults.map((r) => r.output), [{ result: 51, logs: ['temps 21,30'] }])
  // The model was told the tools in TypeScript.
  const offered = model.doGenerateCalls[0].tools.find((t) => t.name === 'codemode')
  assert.ok(offered.description.includes('declare const codemode: {\n  /** Weather of a city */\n  getWeather(input: {\n    city: string\n  }): Promise<unknown>\n}'), offered.description)
  // A tool that needs approval is neither declared nor callable.
  const refused = await codeTool.execute({ code: 'async () => { try { return await codemode.dropTables({}) } catch (e) { return e.message } }' }, { toolCallId: 'call-2', messages: [] })
  assert.deepEqual(refused, { result: 'Tool "dropTables" not found', logs: [] })
})

test(`ai ${major}: a failed run reaches the model as a tool error with the executor's text`, async () => {
  const codeTool = createCodeTool({ tools: {}, executor: remote })
  await assert.rejects(codeTool.execute({ code: 'async () => { console.log("before"); throw new Error("No such order.") }' }, { toolCallId: 't', messages: [] }),
    (err) => err.message === 'No such order.\n\nConsole output:\nbefore')
})
