import OscarBase
import OscarCBOR
import OscarCluster
import OscarRemote
import OscarRuntime

extension ClusterNode.Settings {
    /// Puts `gate` on every frame this node sends and receives, and serves
    /// its two remote controls: the `/system/faults` actor (over the
    /// authenticated transport) and `POST /faults` on the management
    /// endpoint, signed with the cluster secret. A node without this call has
    /// neither, and its frames pass no fault code.
    public mutating func injectFaults(with gate: FaultGate) {
        frameFilter = gate
        onStart.append { node in
            _ = try? node.system.spawn(path: FaultControl.path, on: node.system.loops.loops[0]) {
                FaultControl(gate: gate)
            }
            node.addManagementRoute("/faults") { request in
                switch FaultEndpoint.command(request) {
                case .success(let command):
                    OscarLog.shared.info("fault gate: \(command) (through the management endpoint)")
                    return FaultEndpoint.status(gate.apply(command))
                case .failure(let refusal): return refusal.response
                }
            }
        }
    }
}

extension ClusterNode {
    /// The fault gate installed with `Settings.injectFaults(with:)`, or nil.
    public var faults: FaultGate? { frameFilter as? FaultGate }
}

/// `POST /faults`: a `FaultCommand` as JSON, signed like every
/// state-changing management request (the node checks `SignedRequest`'s
/// headers before the route sees it).
public enum FaultEndpoint {
    /// The fault command in a `POST /faults`; otherwise the response that
    /// refuses it.
    package static func command(_ request: ManagementRoutes.Request) -> Result<FaultCommand, ManagementRoutes.Refusal> {
        guard request.method == "POST" else {
            return .failure(ManagementRoutes.Refusal(status: 405, "POST a fault command"))
        }
        let text = String(decoding: request.body, as: UTF8.self)
        guard let command = JSONBridge.decode(FaultCommand.self, fromJSON: text) else {
            return .failure(
                ManagementRoutes.Refusal(
                    status: 400,
                    "not a fault command; for example {\"blackhole\":{\"peers\":[\"127.0.0.1:7002\"],\"direction\":\"both\"}}"
                ))
        }
        return .success(command)
    }

    /// The gate's state after a command, as JSON.
    package static func status(_ status: FaultStatus) -> ManagementRoutes.Response {
        let rules = status.rules.map { JSONBridge.quote("\($0)") }.joined(separator: ",")
        return ManagementRoutes.Response(
            status: 200, contentType: "application/json",
            body: "{\"rules\":[\(rules)],\"droppedOutbound\":\(status.droppedOutbound),"
                + "\"droppedInbound\":\(status.droppedInbound),\"delayed\":\(status.delayed)}\n")
    }
}
