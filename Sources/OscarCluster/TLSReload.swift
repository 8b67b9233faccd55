import OscarRemote

extension ClusterNode {
    /// Reads this node's TLS certificate, key and CA files again (after a
    /// renewal wrote new ones over them) and makes every connection started
    /// from now on, dialled or accepted, use them. Connections already open
    /// keep the session they were made with and are not disturbed.
    ///
    /// Reads the disk, so it refuses to run on one of the node's loops (an
    /// actor's reaction); call it from a task or a signal handler. When a
    /// file is missing or bad the node keeps its current credentials and the
    /// error names the files. `oscar node` and `ClusterNode.Runner` call it
    /// on SIGUSR1.
    public func reloadTLS() throws(TransportError) {
        guard let tlsFiles else { throw .tlsCredentials("this node runs without TLS; there is nothing to reload") }
        guard !system.loops.loops.contains(where: \.inEventLoop) else {
            throw .tlsCredentials("reloadTLS reads files and must not run on one of the node's loops")
        }
        transport.replaceTLSCredentials(try tlsFiles.read())
    }

    /// The certificate new connections present: the last one `reloadTLS`
    /// read, or the one the node started with. Nil without TLS.
    package var tlsCertificate: CertificateSummary? { transport.currentTLSCredentials?.certificate }
}
