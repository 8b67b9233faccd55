/// The network faults of a run as every picture shows them: a shaded window
/// from each `fault` to the next `fault` or `heal`, labelled above the
/// drawing. One extraction and one label layout, so the timeline and the
/// plots shade the same windows with the same labels in the same places.
extension ChaosReport {
    /// A fault's window: from its `fault` event to the event that ended it
    /// (the next fault, a heal, or the end of the history).
    struct FaultWindow: Equatable {
        var from: UInt64
        var to: UInt64
        var label: String
    }

    /// The fault windows of a history sorted by time.
    static func faultWindows(_ events: [ChaosEvent]) -> [FaultWindow] {
        var windows: [FaultWindow] = []
        var open: (t: UInt64, label: String)?
        func close(_ t: UInt64) {
            guard let f = open else { return }
            windows.append(FaultWindow(from: f.t, to: t, label: f.label))
            open = nil
        }
        for e in events {
            switch e.kind {
            case .fault:
                close(e.t)
                open = (e.t, e.detail ?? "fault")
            case .heal: close(e.t)
            default: break
            }
        }
        close(events.last?.t ?? 0)
        return windows
    }

    /// The fault windows on one time axis, their labels in lanes above the
    /// drawing: each label in the lowest lane where it overlaps no other, so
    /// faults close together (a partition, its heal, the next one) stay
    /// readable.
    struct FaultBand {
        let windows: [FaultWindow]
        let boxes: [LabelBox]
        let lanes: [Int]

        init(_ events: [ChaosEvent], axis: TimeAxis) {
            windows = faultWindows(events)
            let right = TimeAxis.left + TimeAxis.width + 15  // the last pixel a label may reach
            boxes = windows.map { w in
                let textWidth = estimatedTextWidth(w.label, fontSize: labelFontSize)
                return LabelBox(x: max(0, min(axis.x(w.from), right - textWidth)), width: textWidth)
            }
            lanes = labelLanes(boxes)
        }

        /// How far the lanes above the lowest one reach: the drawing starts
        /// this much lower than it would with a single lane.
        var raise: Double { labelLaneHeight * Double(max(lanes.max() ?? 0, 0)) }

        /// The label baseline of `lane`, for a drawing that starts at `top`.
        func baseline(lane: Int, top: Double) -> Double { top - 10 - labelLaneHeight * Double(lane) }

        /// The shaded windows from just above `top` down to `bottom`, with a
        /// thin line from each raised label down to its window; then the
        /// labels, each on a white halo that keeps it legible over the lines
        /// of lower ones.
        func shapes(axis: TimeAxis, top: Double, bottom: Double) -> [String] {
            var shapes: [String] = []
            for (i, w) in windows.enumerated() {
                let x = axis.x(w.from)
                shapes.append(
                    "<rect class=\"fault-window\" x=\"\(x.r)\" y=\"\((top - 6).r)\" width=\"\(max(axis.x(w.to) - x, 1).r)\" height=\"\((bottom - top + 6).r)\" fill=\"\(Colour.fault)\" fill-opacity=\"0.12\"/>"
                )
                if lanes[i] > 0 {
                    shapes.append(
                        "<line x1=\"\(x.r)\" y1=\"\((baseline(lane: lanes[i], top: top) + 2).r)\" x2=\"\(x.r)\" y2=\"\((top - 6).r)\" stroke=\"\(Colour.fault)\" stroke-opacity=\"0.5\" stroke-width=\"0.8\"/>"
                    )
                }
            }
            for (i, w) in windows.enumerated() {
                shapes.append(
                    "<text class=\"fault-label\" x=\"\(boxes[i].x.r)\" y=\"\(baseline(lane: lanes[i], top: top).r)\" font-size=\"\(Int(labelFontSize))\" stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\">\(w.label.xmlEscaped)</text>"
                )
            }
            return shapes
        }
    }

    // MARK: - Label layout

    /// A label's horizontal extent, in pixels.
    struct LabelBox: Equatable {
        var x: Double
        var width: Double
        var end: Double { x + width }
    }

    /// A lane (0 the lowest) for each label, in order: the first lane in
    /// which it comes no closer than `gap` to any label already there.
    /// Deterministic; labels in one lane never overlap.
    static func labelLanes(_ labels: [LabelBox], gap: Double = 6) -> [Int] {
        var occupied: [[LabelBox]] = []
        return labels.map { label in
            let lane =
                occupied.firstIndex { boxes in
                    boxes.allSatisfy { label.x >= $0.end + gap || label.end + gap <= $0.x }
                } ?? occupied.count
            if lane == occupied.count { occupied.append([]) }
            occupied[lane].append(label)
            return lane
        }
    }
}
