import OscarBase
import OscarCBOR
import OscarCluster
import OscarDistributed
import OscarMembership
import OscarRemote
import OscarRuntime

/// The fault gate's remote control, at `/system/faults`: another node (or
/// `oscar chaos`) sends it a `FaultCommand` over the transport, which only
/// admits holders of the cluster secret. Replies with the gate's status.
final class FaultControl: Reactor {
    package static let path = "/system/faults"
    private let gate: FaultGate

    init(gate: FaultGate) { self.gate = gate }

    package static func reactions(_ r: inout Reactions<FaultControl>) {
        r.on(
            FaultCommand.self,
            result: { me, command in
                if command != .status { OscarLog.shared.info("fault gate: \(command)") }
                return me.gate.apply(command)
            })
    }
}
