// One connection's requests on the core: made in order, isolated to the core (no hop each), creates together.
import HalfTunesProtocol

extension DaemonCore {
    /// Runs a connection's prepared requests in order and hands each answer on. The requests arrive in the
    /// bursts the socket delivered them; within a burst, consecutive task.create requests are made together
    /// (`createTasks`: one journal transaction), everything else one by one. The stream is read on the core,
    /// so no hop is made between requests; after every `yieldEvery` requests the core lets other work in.
    func serve(_ requests: AsyncStream<[(RPCRouter.Prepared, Int)]>, router: RPCRouter,
               answer: @Sendable (RPCRouter.Answer, Int) -> Void) async {
        var served = 0
        for await burst in requests {
            var i = 0
            while i < burst.count {
                guard case .create = burst[i].0 else {
                    answer(await router.run(burst[i].0, on: self), burst[i].1)
                    i += 1
                    served += 1
                    if served % Self.yieldEvery == 0 { await Task.yield() }
                    continue
                }
                var run: [(id: RPCID?, bytes: Int, params: TaskCreateParams, caller: Caller)] = []
                while i < burst.count, run.count < Self.maxCreatesTogether, case .create(let id, let p, let caller) = burst[i].0 {
                    run.append((id, burst[i].1, p, caller))
                    i += 1
                }
                let results = await createTasks(run.map { ($0.params, $0.caller) })
                for (request, result) in zip(run, results) {
                    answer(RPCRouter.answer(id: request.id, result), request.bytes)
                }
                served += run.count
                await Task.yield()
            }
        }
    }

    static let yieldEvery = 16
    /// The most task.create requests journaled in one transaction.
    static let maxCreatesTogether = 64
}
